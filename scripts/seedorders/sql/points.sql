-- The points service: an EARN on OrderPaid (v3), a REVERSAL of what was
-- refunded on OrderRefunded (v5), and the events it consumed.
INSERT INTO points_ledger (order_id, customer_id, event_id, entry_type, points, amount, created_at)
SELECT id, customer, event_id, entry_type, points, amount, created_at FROM (
    SELECT g, 1 AS step, id, customer, 'E-' || id || '-v3' AS event_id, 'EARN' AS entry_type, 100 AS points, 100.00 AS amount,
           t + interval '25 ms' AS created_at FROM s
    UNION ALL
    SELECT g, 2, id, customer, 'E-' || id || '-v5', 'REVERSAL', CASE kind WHEN 'REFUNDED' THEN -100 ELSE -40 END,
           CASE kind WHEN 'REFUNDED' THEN 100.00 ELSE 40.00 END, t + interval '45 ms' FROM s WHERE kind <> 'PAID'
) AS e ORDER BY g, step;

INSERT INTO processed_events (consumer, event_id, processed_at)
SELECT 'points-service', 'E-' || id || '-v3', t + interval '25 ms' FROM s
UNION ALL
SELECT 'points-service', 'E-' || id || '-v5', t + interval '45 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO aggregate_versions (consumer, aggregate_id, version, state, updated_at)
SELECT 'points-service', id, CASE kind WHEN 'PAID' THEN 3 ELSE 5 END,
       CASE kind WHEN 'PAID' THEN 'EARNED' WHEN 'REFUNDED' THEN 'REVERSED' ELSE 'PARTIALLY_REVERSED' END,
       t + CASE kind WHEN 'PAID' THEN interval '25 ms' ELSE interval '45 ms' END
FROM s;
