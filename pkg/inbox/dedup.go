//go:build !nodedup

package inbox

// deduplicating is false only in a build with the nodedup tag, which the
// end-to-end tests use to show that their duplicate assertions can fail.
const deduplicating = true

// claimSQL inserts the dedup rows of distinct event ids ($2), each with
// the number of its copies in the batch ($3), in id order. A new row
// starts with the batch's extra copies as duplicates; an existing one adds
// every copy. So a row is new exactly when it comes back with n-1
// duplicates: an existing one comes back with at least n.
const claimSQL = `
	INSERT INTO processed_events (consumer, event_id, duplicates)
	SELECT $1, u.event_id, u.copies - 1 FROM unnest($2::text[], $3::bigint[]) AS u(event_id, copies)
	ORDER BY u.event_id
	ON CONFLICT (consumer, event_id) DO UPDATE
		SET duplicates = processed_events.duplicates + excluded.duplicates + 1
	RETURNING event_id, duplicates`
