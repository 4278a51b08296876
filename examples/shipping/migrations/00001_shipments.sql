-- +goose Up
-- One shipment per paid order: the goods the order paid for (ordered) and
-- those still to go out (items), which refunds that return goods reduce.
CREATE TABLE shipments (
    order_id   TEXT        PRIMARY KEY,
    status     TEXT        NOT NULL CHECK (status IN ('TO_SHIP', 'CANCELLED')),
    ordered    JSONB       NOT NULL,
    items      JSONB       NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per applied event, with the shipment as it left it: the proof
-- that every change happened once (the unique event_id refuses a second).
CREATE TABLE shipment_events (
    id         BIGSERIAL   PRIMARY KEY,
    event_id   TEXT        NOT NULL UNIQUE,
    order_id   TEXT        NOT NULL,
    event_type TEXT        NOT NULL,
    status     TEXT        NOT NULL,
    items      JSONB       NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX shipment_events_order ON shipment_events (order_id, id);

-- +goose Down
DROP TABLE shipment_events;
DROP TABLE shipments;
