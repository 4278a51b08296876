-- Removes what order.sql seeded with the same prefix.
DELETE FROM processed_callbacks USING p WHERE left(processed_callbacks.order_id, length(p.prefix)) = p.prefix;

DELETE FROM order_refunds USING p WHERE left(order_refunds.order_id, length(p.prefix)) = p.prefix;

DELETE FROM outbox_events USING p WHERE left(outbox_events.aggregate_id, length(p.prefix)) = p.prefix;

DELETE FROM orders USING p WHERE left(orders.order_id, length(p.prefix)) = p.prefix;

