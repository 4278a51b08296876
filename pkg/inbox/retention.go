package inbox

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/retention"
)

// DefaultDedupRetention is how long a dedup row is kept: the broker's
// retention (seven days), the longest a delivery of the same event can
// come back by a rewind or a redelivery (docs/decisions.md, Bounded
// tables).
const DefaultDedupRetention = 7 * 24 * time.Hour

// RetentionRule deletes the dedup rows recorded more than keep ago. An
// event delivered again inside keep is still a duplicate; one delivered
// after it meets the version guard, which ignores it as stale when its
// order has moved past it.
func RetentionRule(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "processed_events", Keep: keep, Delete: `
		DELETE FROM processed_events WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM processed_events
			WHERE processed_at <= $1
			LIMIT $2 FOR UPDATE SKIP LOCKED))`}
}
