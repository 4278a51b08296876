-- The inventory service: each order's deduction on OrderPaid (v3) and its
-- restock on OrderRefunded (v5), the stock they leave, and the events it
-- consumed.
INSERT INTO stock (sku, available, deducted, updated_at)
SELECT sku, 1000000, sum(net), max(t)
FROM (SELECT sku_a AS sku, CASE kind WHEN 'PAID' THEN 2 WHEN 'PARTIALLY_REFUNDED' THEN 1 ELSE 0 END AS net, t FROM s
      UNION ALL
      SELECT sku_b, CASE kind WHEN 'REFUNDED' THEN 0 ELSE 1 END, t FROM s) AS lines
GROUP BY sku;

INSERT INTO inventory_orders (order_id, status, reason, items, restocked, updated_at)
SELECT id, CASE kind WHEN 'PAID' THEN 'DEDUCTED' WHEN 'REFUNDED' THEN 'RESTOCKED' ELSE 'PARTIALLY_RESTOCKED' END, '',
       jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 2), jsonb_build_object('sku', sku_b, 'quantity', 1)),
       CASE kind WHEN 'PAID' THEN '[]'
                 WHEN 'REFUNDED' THEN jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 2), jsonb_build_object('sku', sku_b, 'quantity', 1))
                 ELSE jsonb_build_array(jsonb_build_object('sku', sku_a, 'quantity', 1)) END,
       t + CASE kind WHEN 'PAID' THEN interval '25 ms' ELSE interval '45 ms' END
FROM s ORDER BY g;

INSERT INTO stock_movements (order_id, event_id, sku, delta, kind, created_at)
SELECT id, event_id, sku, delta, m.kind, created_at FROM (
    SELECT g, 1 AS step, id, 'E-' || id || '-v3' AS event_id, sku_a AS sku, -2 AS delta, 'DEDUCT' AS kind, t + interval '25 ms' AS created_at FROM s
    UNION ALL
    SELECT g, 2, id, 'E-' || id || '-v3', sku_b, -1, 'DEDUCT', t + interval '25 ms' FROM s
    UNION ALL
    SELECT g, 3, id, 'E-' || id || '-v5', sku_a, CASE kind WHEN 'REFUNDED' THEN 2 ELSE 1 END, 'RESTOCK', t + interval '45 ms' FROM s WHERE kind <> 'PAID'
    UNION ALL
    SELECT g, 4, id, 'E-' || id || '-v5', sku_b, 1, 'RESTOCK', t + interval '45 ms' FROM s WHERE kind = 'REFUNDED'
) AS m ORDER BY g, step;

INSERT INTO processed_events (consumer, event_id, processed_at)
SELECT 'inventory-service', 'E-' || id || '-v3', t + interval '25 ms' FROM s
UNION ALL
SELECT 'inventory-service', 'E-' || id || '-v5', t + interval '45 ms' FROM s WHERE kind <> 'PAID';

INSERT INTO aggregate_versions (consumer, aggregate_id, version, state, updated_at)
SELECT 'inventory-service', id, CASE kind WHEN 'PAID' THEN 3 ELSE 5 END,
       CASE kind WHEN 'PAID' THEN 'DEDUCTED' WHEN 'REFUNDED' THEN 'RESTOCKED' ELSE 'PARTIALLY_RESTOCKED' END,
       t + CASE kind WHEN 'PAID' THEN interval '25 ms' ELSE interval '45 ms' END
FROM s;
