-- The order service: the orders, their refunds, the payment service's
-- callbacks it applied, and its outbox, every event SENT.
INSERT INTO orders (order_id, customer_id, currency, amount, status, version, items, payment_id, refunded_amount, created_at, updated_at)
SELECT id, customer, 'CNY', 100.00, kind, CASE kind WHEN 'PAID' THEN 3 ELSE 5 END,
       jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 2, 'unitPrice', '40.00'),
                         jsonb_build_object('sku', sku_b, 'quantity', 1, 'unitPrice', '20.00')),
       'P-' || id, CASE kind WHEN 'REFUNDED' THEN 100.00 WHEN 'PARTIALLY_REFUNDED' THEN 40.00 ELSE 0 END,
       t, t + CASE kind WHEN 'PAID' THEN interval '20 ms' ELSE interval '40 ms' END
FROM s ORDER BY g;

INSERT INTO order_refunds (refund_id, order_id, kind, payment_id, amount, currency, items, status, reason, requested_at, settled_at)
SELECT 'R-' || id, id, 'REFUND', 'P-' || id, CASE kind WHEN 'REFUNDED' THEN 100.00 ELSE 40.00 END, 'CNY',
       CASE kind WHEN 'REFUNDED'
            THEN jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 2), jsonb_build_object('sku', sku_b, 'quantity', 1))
            ELSE jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 1)) END,
       'SUCCEEDED', '', t + interval '30 ms', t + interval '40 ms'
FROM s WHERE kind <> 'PAID' ORDER BY g;

INSERT INTO processed_callbacks (callback_id, order_id, callback_type, processed_at)
SELECT 'E-' || id || '-paid', id, 'PAYMENT_SUCCEEDED', t + interval '20 ms' FROM s
UNION ALL
SELECT 'E-' || id || '-refunded', id, 'REFUND_SUCCEEDED', t + interval '40 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, headers, status, attempts, next_attempt_at, created_at, sent_at)
SELECT e.event_id, s.id, v.version, v.type, 'order-events',
       jsonb_build_object('eventId', e.event_id, 'eventType', v.type, 'eventVersion', v.event_version,
                          'aggregateId', s.id, 'aggregateVersion', v.version, 'producer', 'order-service',
                          'traceId', md5(e.event_id), 'occurredAt', (to_json(date_trunc('milliseconds', s.t + v.after) AT TIME ZONE 'UTC') #>> '{}') || 'Z',
                          'data', CASE v.type
           WHEN 'OrderCreated' THEN jsonb_build_object('customerId', s.customer, 'currency', 'CNY', 'amount', '100.00',
               'items', jsonb_build_array(jsonb_build_object('sku', s.sku_a, 'quantity', 2, 'unitPrice', '40.00'),
                                          jsonb_build_object('sku', s.sku_b, 'quantity', 1, 'unitPrice', '20.00')))
           WHEN 'OrderCheckedOut' THEN jsonb_build_object('customerId', s.customer, 'currency', 'CNY', 'amount', '100.00')
           WHEN 'OrderPaid' THEN jsonb_build_object('customerId', s.customer, 'currency', 'CNY', 'paidAmount', '100.00',
               'paymentId', 'P-' || s.id,
               'items', jsonb_build_array(jsonb_build_object('sku', s.sku_a, 'quantity', 2), jsonb_build_object('sku', s.sku_b, 'quantity', 1)))
           WHEN 'OrderRefundRequested' THEN jsonb_build_object('currency', 'CNY', 'paymentId', 'P-' || s.id, 'refundId', 'R-' || s.id,
               'amount', CASE s.kind WHEN 'REFUNDED' THEN '100.00' ELSE '40.00' END)
           ELSE jsonb_build_object('customerId', s.customer, 'currency', 'CNY', 'paymentId', 'P-' || s.id, 'refundId', 'R-' || s.id,
               'refundedAmount', CASE s.kind WHEN 'REFUNDED' THEN '100.00' ELSE '40.00' END,
               'totalRefundedAmount', CASE s.kind WHEN 'REFUNDED' THEN '100.00' ELSE '40.00' END,
               'items', r.items, 'totalReturnedItems', r.items) END),
       jsonb_build_object('eventId', e.event_id, 'eventType', v.type, 'aggregateId', s.id, 'eventVersion', CAST(v.event_version AS text)),
       'SENT', 1, s.t + v.after, s.t + v.after, s.t + v.after + interval '5 ms'
FROM s
CROSS JOIN (VALUES (1, 'OrderCreated', 1, interval '0 ms'), (2, 'OrderCheckedOut', 1, interval '10 ms'),
                   (3, 'OrderPaid', 1, interval '20 ms'), (4, 'OrderRefundRequested', 1, interval '30 ms'),
                   (5, 'OrderRefunded', 3, interval '40 ms')) AS v (version, type, event_version, after)
CROSS JOIN LATERAL (SELECT 'E-' || s.id || '-v' || v.version AS event_id) AS e
CROSS JOIN LATERAL (SELECT CASE s.kind WHEN 'REFUNDED'
        THEN jsonb_build_array(jsonb_build_object('sku', s.sku_a, 'quantity', 2), jsonb_build_object('sku', s.sku_b, 'quantity', 1))
        ELSE jsonb_build_array(jsonb_build_object('sku', s.sku_a, 'quantity', 1)) END AS items) AS r
WHERE v.version <= 3 OR s.kind <> 'PAID'
ORDER BY s.g, v.version;
