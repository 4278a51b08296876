-- +goose Up
CREATE TABLE outbox_events (
    id                BIGSERIAL   NOT NULL UNIQUE,
    event_id          TEXT        PRIMARY KEY,
    aggregate_id      TEXT        NOT NULL,
    aggregate_version BIGINT      NOT NULL,
    event_type        TEXT        NOT NULL,
    topic             TEXT        NOT NULL,
    payload           JSONB       NOT NULL,
    headers           JSONB       NOT NULL DEFAULT '{}',
    status            TEXT        NOT NULL DEFAULT 'PENDING' CHECK (status IN ('PENDING', 'SENT')),
    attempts          INT         NOT NULL DEFAULT 0,
    last_error        TEXT,
    next_attempt_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at           TIMESTAMPTZ
);
-- The relay's poll: pending rows in id order.
CREATE INDEX outbox_events_pending ON outbox_events (id) WHERE status = 'PENDING';
-- The per-key order check: an earlier pending row of the same aggregate.
CREATE INDEX outbox_events_pending_aggregate ON outbox_events (aggregate_id, id) WHERE status = 'PENDING';

-- +goose Down
DROP TABLE outbox_events;
