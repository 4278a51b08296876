-- +goose Up
-- A consumer keeps one DEAD row per event: a dead letter whose DLQ publish
-- fails is delivered and dead-lettered again, and each cycle adds its
-- attempts to the same row. Rows written before this merge into the newest
-- of their event, which keeps their attempts, earliest failure and replay
-- audit. A message without an event id has nothing to merge by.
CREATE TEMPORARY TABLE dead_letter_merge ON COMMIT DROP AS
SELECT id,
       max(id) OVER (PARTITION BY consumer, event_id) AS keep,
       sum(attempts) OVER (PARTITION BY consumer, event_id) AS attempts,
       min(first_failed_at) OVER (PARTITION BY consumer, event_id) AS first_failed_at
FROM dead_letters
WHERE status = 'DEAD' AND event_id <> '';

UPDATE dead_letters d SET attempts = m.attempts, first_failed_at = m.first_failed_at
FROM dead_letter_merge m WHERE d.id = m.id AND m.id = m.keep;

UPDATE dlq_replays r SET dead_letter_id = m.keep
FROM dead_letter_merge m WHERE r.dead_letter_id = m.id AND m.id <> m.keep;

DELETE FROM dead_letters d USING dead_letter_merge m WHERE d.id = m.id AND m.id <> m.keep;

CREATE UNIQUE INDEX dead_letters_one_dead_per_event ON dead_letters (consumer, event_id)
    WHERE status = 'DEAD' AND event_id <> '';

-- +goose Down
DROP INDEX dead_letters_one_dead_per_event;
