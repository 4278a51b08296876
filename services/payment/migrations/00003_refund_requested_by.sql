-- +goose Up
-- Who asked for a refund made at once through the operator's route (its
-- X-Operator): a person, or a reconciliation run acting for one. Empty for
-- the refunds the order service asks for (the order records who asked).
ALTER TABLE refunds ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE refunds DROP COLUMN requested_by;
