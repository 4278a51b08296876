-- +goose Up
CREATE TABLE processed_events (
    consumer     TEXT        NOT NULL,
    event_id     TEXT        NOT NULL,
    processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    outcome      TEXT        NOT NULL DEFAULT 'APPLIED',
    PRIMARY KEY (consumer, event_id)
);

-- +goose Down
DROP TABLE processed_events;
