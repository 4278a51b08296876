package reconciliation_test

import (
	"slices"
	"strings"
	"testing"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

func TestVersionRegressions(t *testing.T) {
	at := func(f rec.Facts, payment, inventory, points, notification int64) rec.Facts {
		f.Payment.Consumer.Version = payment
		f.Inventory.Consumer = rec.ConsumerState{Version: inventory, State: "DEDUCTED"}
		f.Points.Consumer.Version = points
		f.Notifications.Consumer.Version = notification
		return f
	}
	restored := paid().Order
	restored.Version, restored.Status = 2, rec.StatusPendingPayment
	tests := []struct {
		name  string
		order rec.Order
		seen  rec.Facts
		want  []string
	}{
		{"every consumer at or behind the order", paid().Order, at(paid(), 2, 3, 3, 3), nil},
		{"consumers past a restored order", restored, at(paid(), 2, 3, 3, 2), []string{"inventory", "points"}},
		{"an order the order service does not know", rec.Order{ID: "O-1"}, at(paid(), 9, 9, 9, 9), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range rec.VersionRegressions(tt.order, tt.seen) {
				got = append(got, f.Service)
				// One fence for the order, to the highest version any
				// consumer applied, under one key.
				if f.Kind != rec.OrderVersionRegressed || f.Action.Type != rec.ActionFence || f.Action.Service != rec.ServiceOrder ||
					f.Action.AtLeast != 3 || f.Action.Key != "FENCE:order:O-1:v2:v3" ||
					!strings.Contains(f.Action.Reason, "changes 3..3") || !strings.Contains(f.Actual, "version 2") {
					t.Errorf("finding %+v", f)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("regressed at %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOrphans(t *testing.T) {
	unknown := func(f rec.Facts) rec.Facts {
		f.Order = rec.Order{ID: "O-1"}
		return f
	}
	onlyPoints := unknown(rec.Facts{})
	onlyPoints.Points.Entries = []rec.PointsEntry{{Type: "EARN", Points: 20}}
	tests := []struct {
		name  string
		facts rec.Facts
		want  []string
	}{
		{"an order the order service knows", paid(), nil},
		{"unknown, effects everywhere", unknown(paid()), []string{"payment", "inventory", "points", "notification"}},
		{"unknown, points only", onlyPoints, []string{"points"}},
		{"unknown to everyone", unknown(rec.Facts{Inventory: rec.Inventory{Status: rec.InventoryNone}}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, f := range rec.Orphans(tt.facts) {
				if f.Kind != rec.OrphanEffect || f.OrderID != "O-1" || f.Action.Type != rec.ActionManualReview {
					t.Errorf("finding %+v", f)
				}
				got = append(got, f.Service)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("orphans at %v, want %v", got, tt.want)
			}
		})
	}
}
