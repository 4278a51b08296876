-- +goose Up
-- How many copies of the event arrived after the first and were recognised
-- as duplicates: the figure that tells deduplication apart from the other
-- guards (the version guard ignoring a stale copy, a unique key turning a
-- second effect into a dead letter), which would leave the same effects.
ALTER TABLE processed_events ADD COLUMN duplicates INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE processed_events DROP COLUMN duplicates;
