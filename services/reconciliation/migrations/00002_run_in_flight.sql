-- +goose Up
-- The orders a run was asked for by id but did not compare: their last
-- change was younger than the run's min_age, so they were still in flight.
ALTER TABLE reconciliation_runs ADD COLUMN in_flight TEXT[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE reconciliation_runs DROP COLUMN in_flight;
