-- +goose Up
-- Stock per SKU: available can be sold, deducted is held by paid orders.
CREATE TABLE stock (
    sku        TEXT        PRIMARY KEY,
    available  INT         NOT NULL CHECK (available >= 0),
    deducted   INT         NOT NULL DEFAULT 0 CHECK (deducted >= 0),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Inventory's view of each order it has seen, with the lines it deducted so
-- a refund restocks exactly those.
CREATE TABLE inventory_orders (
    order_id   TEXT        PRIMARY KEY,
    status     TEXT        NOT NULL CHECK (status IN ('NONE', 'DEDUCTED', 'RESTOCKED', 'REJECTED')),
    reason     TEXT        NOT NULL DEFAULT '',
    items      JSONB       NOT NULL DEFAULT '[]',
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One row per SKU per applied event: the proof that every side effect
-- happened once (the unique key refuses a second one).
CREATE TABLE stock_movements (
    id         BIGSERIAL   PRIMARY KEY,
    order_id   TEXT        NOT NULL,
    event_id   TEXT        NOT NULL,
    sku        TEXT        NOT NULL,
    delta      INT         NOT NULL CHECK (delta <> 0),
    kind       TEXT        NOT NULL CHECK (kind IN ('DEDUCT', 'RESTOCK')),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (event_id, sku)
);
CREATE INDEX stock_movements_order ON stock_movements (order_id, id);

-- +goose Down
DROP TABLE stock_movements;
DROP TABLE inventory_orders;
DROP TABLE stock;
