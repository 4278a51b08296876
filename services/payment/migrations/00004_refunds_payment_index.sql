-- +goose Up
-- refunds.payment_id references payments: deleting a payment (or changing
-- its id) makes Postgres look for refunds that reference it, which without
-- an index reads the whole refunds table once per payment deleted.
-- Removing 100 000 seeded orders' payments took 3m47s that way
-- (docs/runs/2026-12-05-reconcile-100k-paid.txt). Refunds rejected for
-- want of a payment reference none (payment_id NULL); the reference check
-- never looks for NULL, so they stay out of the index.
CREATE INDEX refunds_payment ON refunds (payment_id) WHERE payment_id IS NOT NULL;

-- +goose Down
DROP INDEX refunds_payment;
