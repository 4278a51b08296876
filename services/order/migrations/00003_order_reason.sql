-- +goose Up
-- Why an order ended where it is: the reason a cancel request gave, or
-- OUT_OF_STOCK once the inventory service reported that the stock could not
-- cover the paid order (its money then goes back and it is cancelled).
ALTER TABLE orders ADD COLUMN reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE orders DROP COLUMN reason;
