-- +goose Up
-- Why an order ended where it is: the reason a cancel request gave, or
-- OUT_OF_STOCK once the inventory service reported that the stock could not
-- cover the paid order (its money then goes back and it is cancelled).
ALTER TABLE orders ADD COLUMN reason TEXT NOT NULL DEFAULT '';

-- Who asked for a refund: the operator (X-Operator) of one asked through the
-- admin route; empty for the customer's own.
ALTER TABLE order_refunds ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';

-- Goods returned after their money came back (a refund of money alone came
-- first) are a refund of no money.
ALTER TABLE order_refunds DROP CONSTRAINT order_refunds_amount_check;
ALTER TABLE order_refunds ADD CONSTRAINT order_refunds_amount_check CHECK (amount >= 0);

-- +goose Down
ALTER TABLE order_refunds DROP CONSTRAINT order_refunds_amount_check;
ALTER TABLE order_refunds ADD CONSTRAINT order_refunds_amount_check CHECK (amount > 0);
ALTER TABLE order_refunds DROP COLUMN requested_by;
ALTER TABLE orders DROP COLUMN reason;
