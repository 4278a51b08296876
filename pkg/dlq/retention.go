package dlq

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/retention"
)

// DefaultResolvedRetention is how long a resolved (REPLAYED) dead letter
// and its replays are kept after its last replay: a month of history for
// whoever investigates an incident after it was handled.
const DefaultResolvedRetention = 30 * 24 * time.Hour

// RetentionRule deletes REPLAYED dead letters whose letter and every
// replay are older than keep, with their replays. DEAD letters stay until
// someone resolves them, however old.
func RetentionRule(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "dead_letters", Keep: keep, Delete: `
		WITH gone AS (
			SELECT id FROM dead_letters d
			WHERE status = 'REPLAYED' AND dead_lettered_at <= $1
			  AND NOT EXISTS (SELECT 1 FROM dlq_replays r WHERE r.dead_letter_id = d.id AND r.requested_at > $1)
			LIMIT $2 FOR UPDATE SKIP LOCKED
		), replays AS (
			DELETE FROM dlq_replays WHERE dead_letter_id IN (SELECT id FROM gone)
		)
		DELETE FROM dead_letters WHERE id IN (SELECT id FROM gone)`}
}
