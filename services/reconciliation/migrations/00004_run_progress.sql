-- +goose Up
-- What a run is doing, for whichever process reads it: its phase (COMPARING
-- the orders' facts, then ORPHANS, the pass over the consumers' effects of
-- orders the order service does not know), when the orphan pass began (the
-- comparison took from started_at until then), and how far the orphan pass
-- has read each consumer ([{service, pages, orders, orphans, done}]). The
-- running process writes them with the counts after every page; a run's
-- last values stay when it ends, so a failed run shows where it stopped.
ALTER TABLE reconciliation_runs
    ADD COLUMN phase TEXT NOT NULL DEFAULT 'COMPARING' CHECK (phase IN ('COMPARING', 'ORPHANS')),
    ADD COLUMN orphans_started_at TIMESTAMPTZ,
    ADD COLUMN orphan_scan JSONB NOT NULL DEFAULT '[]';

-- +goose Down
ALTER TABLE reconciliation_runs
    DROP COLUMN orphan_scan,
    DROP COLUMN orphans_started_at,
    DROP COLUMN phase;
