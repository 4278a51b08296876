-- +goose Up
-- A run outlives the request that started it: the process running it
-- beats heartbeat_at while it works (and records its progress in
-- checked, findings and actions), so a run whose process died is told
-- from a slow one and marked FAILED instead of staying RUNNING.
ALTER TABLE reconciliation_runs ADD COLUMN heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now();

-- Runs left RUNNING by processes that stopped before this migration had no
-- heartbeat to tell them from a live run; none may stay RUNNING.
UPDATE reconciliation_runs
SET status = 'FAILED', finished_at = now(), error = 'abandoned: the process running it stopped before the run finished'
WHERE status = 'RUNNING';

-- One run at a time, whichever process starts it: a second is refused while
-- one runs (409 RUN_IN_PROGRESS), decided by the database.
CREATE UNIQUE INDEX reconciliation_runs_one_running ON reconciliation_runs ((true)) WHERE status = 'RUNNING';

-- +goose Down
DROP INDEX reconciliation_runs_one_running;
ALTER TABLE reconciliation_runs DROP COLUMN heartbeat_at;
