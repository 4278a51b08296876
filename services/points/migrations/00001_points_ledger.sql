-- +goose Up
-- The points ledger: one row per applied event (event_id is unique, the
-- proof that every side effect happened once). An order's points and a
-- customer's balance are sums over it, so nothing can drift from it.
CREATE TABLE points_ledger (
    id          BIGSERIAL     PRIMARY KEY,
    order_id    TEXT          NOT NULL,
    customer_id TEXT          NOT NULL,
    event_id    TEXT          NOT NULL UNIQUE,
    entry_type  TEXT          NOT NULL CHECK (entry_type IN ('EARN', 'REVERSAL')),
    points      INT           NOT NULL,
    amount      NUMERIC(18,2) NOT NULL CHECK (amount >= 0),
    created_at  TIMESTAMPTZ   NOT NULL DEFAULT now(),
    CHECK ((entry_type = 'EARN' AND points >= 0) OR (entry_type = 'REVERSAL' AND points <= 0))
);
CREATE INDEX points_ledger_order ON points_ledger (order_id, id);
CREATE INDEX points_ledger_customer ON points_ledger (customer_id);

-- +goose Down
DROP TABLE points_ledger;
