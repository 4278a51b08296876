-- Removes what inventory.sql seeded with the same prefix and SKUs.
DELETE FROM stock_movements USING p WHERE left(stock_movements.order_id, length(p.prefix)) = p.prefix;

DELETE FROM inventory_orders USING p WHERE left(inventory_orders.order_id, length(p.prefix)) = p.prefix;

DELETE FROM processed_events USING p WHERE left(processed_events.event_id, length('E-' || p.prefix)) = 'E-' || p.prefix;

DELETE FROM aggregate_versions USING p WHERE left(aggregate_versions.aggregate_id, length(p.prefix)) = p.prefix;

DELETE FROM stock USING p WHERE stock.sku IN (p.sku_a, p.sku_b);
