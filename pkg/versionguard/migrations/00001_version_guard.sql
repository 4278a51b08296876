-- +goose Up
CREATE TABLE aggregate_versions (
    consumer     TEXT        NOT NULL,
    aggregate_id TEXT        NOT NULL,
    version      BIGINT      NOT NULL,
    state        TEXT        NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, aggregate_id)
);

-- Events that arrived before a predecessor they need. Applied, in version
-- order, as soon as the predecessor has been applied.
CREATE TABLE parked_events (
    consumer          TEXT        NOT NULL,
    event_id          TEXT        NOT NULL,
    aggregate_id      TEXT        NOT NULL,
    aggregate_version BIGINT      NOT NULL,
    event_type        TEXT        NOT NULL,
    payload           JSONB       NOT NULL,
    parked_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX parked_events_aggregate ON parked_events (consumer, aggregate_id, aggregate_version);
CREATE INDEX parked_events_age ON parked_events (parked_at);

-- +goose Down
DROP TABLE parked_events;
DROP TABLE aggregate_versions;
