-- +goose Up
-- One row per order; version counts its state changes and guards every
-- update (UPDATE ... WHERE version = $expected).
CREATE TABLE orders (
    order_id        TEXT          PRIMARY KEY,
    customer_id     TEXT          NOT NULL,
    currency        TEXT          NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    amount          NUMERIC(18,2) NOT NULL CHECK (amount >= 0),
    status          TEXT          NOT NULL CHECK (status IN
                        ('CREATED', 'PENDING_PAYMENT', 'PAID', 'REFUNDING', 'REFUNDED', 'CANCELLED')),
    version         BIGINT        NOT NULL CHECK (version >= 1),
    -- [{"sku": "SKU-1", "quantity": 2, "unitPrice": "40.00"}]
    items           JSONB         NOT NULL,
    payment_id      TEXT,
    refund_id       TEXT,
    refund_amount   NUMERIC(18,2),
    refunded_amount NUMERIC(18,2) NOT NULL DEFAULT 0,
    created_at      TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ   NOT NULL DEFAULT now()
);

-- The payment callbacks already handled: a re-delivered callback finds its
-- callbackId here and changes nothing, even after later transitions.
CREATE TABLE processed_callbacks (
    callback_id   TEXT        PRIMARY KEY,
    order_id      TEXT        NOT NULL REFERENCES orders (order_id),
    callback_type TEXT        NOT NULL,
    processed_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX processed_callbacks_order ON processed_callbacks (order_id);

-- +goose Down
DROP TABLE processed_callbacks;
DROP TABLE orders;
