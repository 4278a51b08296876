-- Removes what points.sql seeded with the same prefix.
DELETE FROM points_ledger USING p WHERE left(points_ledger.order_id, length(p.prefix)) = p.prefix;

DELETE FROM processed_events USING p WHERE left(processed_events.event_id, length('E-' || p.prefix)) = 'E-' || p.prefix;

DELETE FROM aggregate_versions USING p WHERE left(aggregate_versions.aggregate_id, length(p.prefix)) = p.prefix;

