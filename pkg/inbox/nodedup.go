//go:build nodedup

package inbox

// deduplicating is false in this build: every delivery of an event is
// claimed as its first, so a copy reaches the version guard and the side
// effects as if it were new, and no copy is counted as a duplicate. Never
// ship it; it exists so that the end-to-end tests can be run against
// consumers without deduplication and be seen to fail (docs/drills.md,
// Tests that can fail).
const deduplicating = false

// claimSQL records the dedup rows and recognises nothing.
const claimSQL = `
	INSERT INTO processed_events (consumer, event_id)
	SELECT $1, u.event_id FROM unnest($2::text[], $3::bigint[]) AS u(event_id, copies)
	ORDER BY u.event_id
	ON CONFLICT (consumer, event_id) DO NOTHING
	RETURNING event_id, duplicates`
