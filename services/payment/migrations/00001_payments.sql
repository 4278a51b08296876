-- +goose Up
-- One payment per order: the UNIQUE order_id is what makes paying twice,
-- even concurrently, an idempotent success.
CREATE TABLE payments (
    payment_id TEXT          PRIMARY KEY,
    order_id   TEXT          NOT NULL UNIQUE,
    amount     NUMERIC(18,2) NOT NULL CHECK (amount > 0),
    currency   TEXT          NOT NULL,
    status     TEXT          NOT NULL CHECK (status IN ('SUCCEEDED', 'PARTIALLY_REFUNDED', 'REFUNDED')),
    refunded   NUMERIC(18,2) NOT NULL DEFAULT 0 CHECK (refunded >= 0 AND refunded <= amount),
    created_at TIMESTAMPTZ   NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ   NOT NULL DEFAULT now()
);

-- The refunds ledger: every refund request's outcome, executed or rejected.
-- amount is unconstrained NUMERIC so a rejected request is recorded exactly
-- as it was asked for, however malformed; payment_id is NULL when the order
-- has no payment here (reason NO_PAYMENT).
CREATE TABLE refunds (
    refund_id  TEXT          PRIMARY KEY,
    order_id   TEXT          NOT NULL,
    payment_id TEXT          REFERENCES payments (payment_id),
    amount     NUMERIC       NOT NULL,
    currency   TEXT          NOT NULL,
    status     TEXT          NOT NULL CHECK (status IN ('SUCCEEDED', 'REJECTED')),
    reason     TEXT,
    created_at TIMESTAMPTZ   NOT NULL DEFAULT now()
);
CREATE INDEX refunds_order ON refunds (order_id);

-- +goose Down
DROP TABLE refunds;
DROP TABLE payments;
