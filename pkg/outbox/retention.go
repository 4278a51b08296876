package outbox

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/retention"
)

// DefaultSentRetention is how long a SENT row is kept after it was sent:
// as long as the broker keeps the event (Kafka's default log.retention of
// seven days), so every event the broker still holds can be looked up and
// republished from its row (docs/decisions.md, Bounded tables).
const DefaultSentRetention = 7 * 24 * time.Hour

// RetentionRule deletes SENT rows sent more than keep ago. PENDING rows
// are never deleted, however old. There is no index on sent_at: one would
// cost every relayed row an index entry; the pruner's scan stops at its
// batch and runs every few minutes.
func RetentionRule(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "outbox_events", Keep: keep, Delete: `
		DELETE FROM outbox_events WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM outbox_events
			WHERE status = 'SENT' AND sent_at <= $1
			LIMIT $2 FOR UPDATE SKIP LOCKED))`}
}
