-- +goose Up
-- An order may be refunded several times, in part: PARTIALLY_REFUNDED until
-- the whole amount is back.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN
    ('CREATED', 'PENDING_PAYMENT', 'PAID', 'REFUNDING', 'PARTIALLY_REFUNDED', 'REFUNDED', 'CANCELLED'));

-- Every refund of an order and every payment it returned (one that arrived
-- after the order was cancelled, say), with the goods each gave back.
CREATE TABLE order_refunds (
    refund_id    TEXT          PRIMARY KEY,
    order_id     TEXT          NOT NULL REFERENCES orders (order_id),
    kind         TEXT          NOT NULL CHECK (kind IN ('REFUND', 'PAYMENT_RETURN')),
    payment_id   TEXT          NOT NULL,
    amount       NUMERIC(18,2) NOT NULL CHECK (amount > 0),
    currency     TEXT          NOT NULL,
    -- [{"sku": "SKU-1", "quantity": 1}]; [] for money alone
    items        JSONB         NOT NULL DEFAULT '[]',
    status       TEXT          NOT NULL CHECK (status IN ('REQUESTED', 'SUCCEEDED', 'REJECTED')),
    reason       TEXT          NOT NULL DEFAULT '',
    requested_at TIMESTAMPTZ   NOT NULL DEFAULT now(),
    settled_at   TIMESTAMPTZ
);
CREATE INDEX order_refunds_order ON order_refunds (order_id, requested_at);

-- The one refund an order could have before: it returned every item.
INSERT INTO order_refunds (refund_id, order_id, kind, payment_id, amount, currency, items, status, settled_at)
SELECT refund_id, order_id, 'REFUND', coalesce(payment_id, ''), refund_amount, currency,
       CASE WHEN status = 'REFUNDED'
            THEN (SELECT jsonb_agg(jsonb_build_object('sku', i->>'sku', 'quantity', (i->>'quantity')::int)) FROM jsonb_array_elements(items) AS i)
            ELSE '[]' END,
       CASE status WHEN 'REFUNDED' THEN 'SUCCEEDED' WHEN 'REFUNDING' THEN 'REQUESTED' ELSE 'REJECTED' END,
       CASE WHEN status = 'REFUNDING' THEN NULL ELSE updated_at END
FROM orders WHERE refund_id IS NOT NULL;
ALTER TABLE orders DROP COLUMN refund_id, DROP COLUMN refund_amount;

-- Reconciliation and the convergence monitor page through orders by when
-- they last changed.
CREATE INDEX orders_updated ON orders (updated_at, order_id);

-- +goose Down
DROP INDEX orders_updated;
ALTER TABLE orders ADD COLUMN refund_id TEXT, ADD COLUMN refund_amount NUMERIC(18,2);
UPDATE orders o SET refund_id = r.refund_id, refund_amount = r.amount
FROM (SELECT DISTINCT ON (order_id) order_id, refund_id, amount FROM order_refunds
      WHERE kind = 'REFUND' ORDER BY order_id, requested_at DESC) AS r
WHERE o.order_id = r.order_id;
DROP TABLE order_refunds;
UPDATE orders SET status = 'PAID' WHERE status = 'PARTIALLY_REFUNDED';
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN
    ('CREATED', 'PENDING_PAYMENT', 'PAID', 'REFUNDING', 'REFUNDED', 'CANCELLED'));
