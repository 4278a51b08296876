-- +goose Up
-- A payment that reached an order after it was cancelled is returned, and
-- the customer is told.
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check CHECK (kind IN
    ('ORDER_PAID', 'ORDER_REFUNDED', 'REFUND_REJECTED', 'PAYMENT_RETURNED'));

-- +goose Down
DELETE FROM notifications WHERE kind = 'PAYMENT_RETURNED';
ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications ADD CONSTRAINT notifications_kind_check CHECK (kind IN
    ('ORDER_PAID', 'ORDER_REFUNDED', 'REFUND_REJECTED'));
