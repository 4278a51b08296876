package loadgen_test

import (
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// A mixed run's events: valid, keyed by their order, versions rising in
// each order's logical sequence, the refund first where Reversed, and
// about one event in ten published twice.
func TestMixedEvents(t *testing.T) {
	const orders = 2000
	shapes := map[loadgen.Shape]int{}
	var events, copies, reversed int
	for i := 1; i <= orders; i++ {
		envs, err := loadgen.MixedEvents("mix1", i, 20, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		shape := loadgen.ShapeOf(i)
		shapes[shape]++
		seen := map[string]int{}
		for _, env := range envs {
			if _, err := suiteapi.Record("order-events", env); err != nil {
				t.Fatalf("order %d: %s is not valid: %v", i, env.EventType, err)
			}
			if env.AggregateID != loadgen.OrderID("mix1", i) {
				t.Fatalf("order %d: event of %s", i, env.AggregateID)
			}
			seen[env.EventID]++
		}
		distinct := map[loadgen.Shape]int{loadgen.ShapePaid: 1, loadgen.ShapeRefunded: 2, loadgen.ShapeRefundRejected: 2}[shape]
		if len(seen) != distinct {
			t.Fatalf("order %d (shape %d): %d distinct events, want %d", i, shape, len(seen), distinct)
		}
		for id, n := range seen {
			if want := map[bool]int{false: 1, true: 2}[loadgen.Republished(id)]; n != want {
				t.Fatalf("order %d: %s published %d times, want %d", i, id, n, want)
			}
			events++
			copies += n - 1
		}
		first, second := envs[0], envs[min(1, len(envs)-1)]
		if shape != loadgen.ShapePaid {
			if first.EventID == second.EventID {
				t.Fatalf("order %d: its copy before its other event", i)
			}
			want := map[loadgen.Shape]event.Type{loadgen.ShapeRefunded: event.OrderRefunded, loadgen.ShapeRefundRejected: event.OrderRefundRejected}[shape]
			refund := second
			if loadgen.Reversed(i) {
				refund = first
				reversed++
			}
			if refund.EventType != want || refund.AggregateVersion != loadgen.RefundVersion ||
				refund.EventID != loadgen.RefundEventID("mix1", i) {
				t.Fatalf("order %d: refund event %s v%d %s, want %s v%d", i, refund.EventType, refund.AggregateVersion,
					refund.EventID, want, loadgen.RefundVersion)
			}
		}
		if first.EventType == event.OrderPaid && first.AggregateVersion != loadgen.PaidVersion {
			t.Fatalf("order %d: OrderPaid at version %d", i, first.AggregateVersion)
		}
	}
	if shapes[loadgen.ShapeRefunded] != orders*3/10 || shapes[loadgen.ShapeRefundRejected] != orders/10 {
		t.Errorf("shapes %v of %d orders, want 30%% refunded and 10%% rejected", shapes, orders)
	}
	if share := float64(copies) / float64(events); share < 0.07 || share > 0.13 {
		t.Errorf("%d of %d events republished (%.1f%%), want about 10%%", copies, events, 100*share)
	}
	if reversed == 0 {
		t.Error("no order's events are published newest first")
	}
}
