-- Removes what payment.sql seeded with the same prefix.
DELETE FROM refunds USING p WHERE left(refunds.order_id, length(p.prefix)) = p.prefix;

DELETE FROM outbox_events USING p WHERE left(outbox_events.aggregate_id, length(p.prefix)) = p.prefix;

DELETE FROM processed_events USING p WHERE left(processed_events.event_id, length('E-' || p.prefix)) = 'E-' || p.prefix;

DELETE FROM aggregate_versions USING p WHERE left(aggregate_versions.aggregate_id, length(p.prefix)) = p.prefix;

DELETE FROM payments USING p WHERE left(payments.order_id, length(p.prefix)) = p.prefix;

