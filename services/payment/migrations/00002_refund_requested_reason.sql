-- +goose Up
-- Why a refund was asked for, when someone other than the order service's
-- refund flow asked (an operator or reconciliation, through the admin API):
-- the ledger then shows which money went back by compensation. Empty for
-- the refunds the order service requested.
ALTER TABLE refunds ADD COLUMN requested_reason TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE refunds DROP COLUMN requested_reason;
