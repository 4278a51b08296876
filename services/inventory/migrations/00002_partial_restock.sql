-- +goose Up
-- Refunds return goods in part: an order is PARTIALLY_RESTOCKED until every
-- unit it deducted is back, and records what is back so no unit is
-- restocked twice.
ALTER TABLE inventory_orders DROP CONSTRAINT inventory_orders_status_check;
ALTER TABLE inventory_orders ADD CONSTRAINT inventory_orders_status_check CHECK (status IN
    ('NONE', 'DEDUCTED', 'PARTIALLY_RESTOCKED', 'RESTOCKED', 'REJECTED'));
ALTER TABLE inventory_orders ADD COLUMN restocked JSONB NOT NULL DEFAULT '[]';
UPDATE inventory_orders SET restocked = items WHERE status = 'RESTOCKED';

-- +goose Down
ALTER TABLE inventory_orders DROP COLUMN restocked;
UPDATE inventory_orders SET status = 'DEDUCTED' WHERE status = 'PARTIALLY_RESTOCKED';
ALTER TABLE inventory_orders DROP CONSTRAINT inventory_orders_status_check;
ALTER TABLE inventory_orders ADD CONSTRAINT inventory_orders_status_check CHECK (status IN
    ('NONE', 'DEDUCTED', 'RESTOCKED', 'REJECTED'));
