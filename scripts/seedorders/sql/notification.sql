-- The notification service: ORDER_PAID on OrderPaid (v3), ORDER_REFUNDED
-- on OrderRefunded (v5), and the events it consumed.
INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body, created_at)
SELECT id, customer, event_id, kind, 'IN_APP', body, created_at FROM (
    SELECT g, 1 AS step, id, customer, 'E-' || id || '-v3' AS event_id, 'ORDER_PAID' AS kind,
           'We received your payment of 100.00 CNY for order ' || id || '. We are preparing your items.' AS body,
           t + interval '25 ms' AS created_at FROM s
    UNION ALL
    SELECT g, 2, id, customer, 'E-' || id || '-v5', 'ORDER_REFUNDED',
           'Your refund of ' || CASE kind WHEN 'REFUNDED' THEN '100.00' ELSE '40.00' END || ' CNY for order ' || id || ' is complete.',
           t + interval '45 ms' FROM s WHERE kind <> 'PAID'
) AS n ORDER BY g, step;

INSERT INTO processed_events (consumer, event_id, processed_at)
SELECT 'notification-service', 'E-' || id || '-v3', t + interval '25 ms' FROM s
UNION ALL
SELECT 'notification-service', 'E-' || id || '-v5', t + interval '45 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO aggregate_versions (consumer, aggregate_id, version, state, updated_at)
SELECT 'notification-service', id, CASE kind WHEN 'PAID' THEN 3 ELSE 5 END,
       CASE kind WHEN 'PAID' THEN 'PAID_NOTIFIED' ELSE 'REFUNDED_NOTIFIED' END,
       t + CASE kind WHEN 'PAID' THEN interval '25 ms' ELSE interval '45 ms' END
FROM s;
