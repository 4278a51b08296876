-- +goose Up
CREATE TABLE dead_letters (
    id               BIGSERIAL   PRIMARY KEY,
    consumer         TEXT        NOT NULL,
    event_id         TEXT        NOT NULL,
    aggregate_id     TEXT        NOT NULL DEFAULT '',
    event_type       TEXT        NOT NULL DEFAULT '',
    original_topic   TEXT        NOT NULL,
    original_partition INT       NOT NULL DEFAULT -1,
    original_offset  BIGINT      NOT NULL DEFAULT -1,
    message_key      BYTEA,
    message_value    BYTEA       NOT NULL,
    headers          JSONB       NOT NULL DEFAULT '{}',
    failure_reason   TEXT        NOT NULL,
    error_class      TEXT        NOT NULL,
    attempts         INT         NOT NULL,
    first_failed_at  TIMESTAMPTZ NOT NULL,
    dead_lettered_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    status           TEXT        NOT NULL DEFAULT 'DEAD' CHECK (status IN ('DEAD', 'REPLAYED'))
);
CREATE INDEX dead_letters_aggregate ON dead_letters (aggregate_id);
CREATE INDEX dead_letters_event ON dead_letters (event_id);

-- Every replay of a dead letter: who asked, when, and what happened.
CREATE TABLE dlq_replays (
    id             BIGSERIAL   PRIMARY KEY,
    dead_letter_id BIGINT      NOT NULL REFERENCES dead_letters (id),
    requested_by   TEXT        NOT NULL,
    requested_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    outcome        TEXT        NOT NULL,
    detail         TEXT        NOT NULL DEFAULT ''
);

-- +goose Down
DROP TABLE dlq_replays;
DROP TABLE dead_letters;
