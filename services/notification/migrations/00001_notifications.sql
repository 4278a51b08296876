-- +goose Up
-- Every notification the default (database) sender recorded: one row per
-- customer-facing event (event_id is unique, the proof that every side
-- effect happened once).
CREATE TABLE notifications (
    id          BIGSERIAL   PRIMARY KEY,
    order_id    TEXT        NOT NULL,
    customer_id TEXT        NOT NULL,
    event_id    TEXT        NOT NULL UNIQUE,
    kind        TEXT        NOT NULL CHECK (kind IN ('ORDER_PAID', 'ORDER_REFUNDED', 'REFUND_REJECTED')),
    channel     TEXT        NOT NULL,
    body        TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX notifications_order ON notifications (order_id, id);

-- +goose Down
DROP TABLE notifications;
