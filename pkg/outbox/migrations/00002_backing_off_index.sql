-- +goose Up
-- The relay's per-key order check looks for rows still backing off; without
-- this index that look-up is a sequential scan of the whole outbox on every
-- poll (25 ms at 20 000 rows instead of 0.5 ms).
CREATE INDEX outbox_events_backing_off ON outbox_events (next_attempt_at) WHERE status = 'PENDING';

-- +goose Down
DROP INDEX outbox_events_backing_off;
