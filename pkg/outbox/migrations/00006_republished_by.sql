-- +goose Up
-- Who last made a row due again through the admin API (its X-Operator: a
-- person, or a reconciliation run acting for one), and when: the audit of
-- a republish.
ALTER TABLE outbox_events ADD COLUMN republished_by TEXT, ADD COLUMN republished_at TIMESTAMPTZ;

-- +goose Down
ALTER TABLE outbox_events DROP COLUMN republished_at, DROP COLUMN republished_by;
