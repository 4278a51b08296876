-- The payment service: a payment per order, the refunds it made, the
-- refund requests it consumed, and its callbacks to the order service,
-- every one SENT.
INSERT INTO payments (payment_id, order_id, amount, currency, status, refunded, created_at, updated_at)
SELECT 'P-' || id, id, 100.00, 'CNY', CASE kind WHEN 'PAID' THEN 'SUCCEEDED' ELSE kind END,
       CASE kind WHEN 'REFUNDED' THEN 100.00 WHEN 'PARTIALLY_REFUNDED' THEN 40.00 ELSE 0 END,
       t + interval '15 ms', t + CASE kind WHEN 'PAID' THEN interval '15 ms' ELSE interval '35 ms' END
FROM s ORDER BY g;

INSERT INTO refunds (refund_id, order_id, payment_id, amount, currency, status, reason, created_at)
SELECT 'R-' || id, id, 'P-' || id, CASE kind WHEN 'REFUNDED' THEN 100 ELSE 40 END, 'CNY', 'SUCCEEDED', '', t + interval '35 ms'
FROM s WHERE kind <> 'PAID' ORDER BY g;

INSERT INTO processed_events (consumer, event_id, processed_at)
SELECT 'payment-service', 'E-' || id || '-v4', t + interval '35 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO aggregate_versions (consumer, aggregate_id, version, state, updated_at)
SELECT 'payment-service', id, 4, 'REFUND_HANDLED', t + interval '35 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, headers, status, attempts, next_attempt_at, created_at, sent_at)
SELECT c.callback_id, s.id, c.version, c.type, 'order-callbacks',
       jsonb_build_object('type', c.type, 'callbackId', c.callback_id, 'orderId', s.id, 'paymentId', 'P-' || s.id,
                          'currency', 'CNY', 'amount', c.amount)
         || CASE c.type WHEN 'REFUND_SUCCEEDED' THEN jsonb_build_object('refundId', 'R-' || s.id) ELSE '{}' END,
       jsonb_build_object('eventId', c.callback_id, 'eventType', c.type, 'aggregateId', s.id),
       'SENT', 1, s.t + c.after, s.t + c.after, s.t + c.after + interval '5 ms'
FROM s
CROSS JOIN LATERAL (VALUES ('E-' || s.id || '-paid', 2, 'PAYMENT_SUCCEEDED', '100.00', interval '15 ms'),
                           ('E-' || s.id || '-refunded', 4, 'REFUND_SUCCEEDED',
                            CASE s.kind WHEN 'REFUNDED' THEN '100.00' ELSE '40.00' END, interval '35 ms'))
     AS c (callback_id, version, type, amount, after)
WHERE c.version = 2 OR s.kind <> 'PAID'
ORDER BY s.g, c.version;
