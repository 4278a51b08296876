package reconciliation_test

import (
	"slices"
	"testing"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// twoSKUs returns paid() for an order of two SKU-1 at 5.00 and one SKU-2 at
// 10.00: the same 20.00, so only the goods differ.
func twoSKUs() rec.Facts {
	f := paid()
	f.Order.Items = []rec.OrderLine{
		{Line: rec.Line{SKU: "SKU-1", Quantity: 2}, UnitPrice: dec("5")},
		{Line: rec.Line{SKU: "SKU-2", Quantity: 1}, UnitPrice: dec("10")},
	}
	f.Inventory.Items = []rec.Line{{SKU: "SKU-1", Quantity: 2}, {SKU: "SKU-2", Quantity: 1}}
	return f
}

// TestMissingRestockIsReported: goods a refund returned that inventory has
// not put back in stock are a missing inventory effect, answered by
// republishing the order's events, whichever SKU and however many units
// are missing; goods put back exactly as returned are no finding, and more
// than returned is an extra effect for a person to review.
func TestMissingRestockIsReported(t *testing.T) {
	one, two := rec.Line{SKU: "SKU-1", Quantity: 1}, rec.Line{SKU: "SKU-1", Quantity: 2}
	missing := []want{{rec.MissingEffect, rec.ServiceInventory, rec.ActionRepublish}}
	tests := []struct {
		name      string
		facts     rec.Facts
		restocked []rec.Line
		status    string
		want      []want
	}{
		{"one unit returned, none restocked", refunded(paid(), "R-1", "10.00", -10, one), nil, rec.InventoryDeducted, missing},
		{"both units returned, one restocked", refunded(paid(), "R-1", "20.00", -20, two), []rec.Line{one}, rec.InventoryPartiallyRestocked, missing},
		{"two refunds of a unit each, the second never restocked",
			refunded(refunded(paid(), "R-1", "10.00", -10, one), "R-2", "10.00", -10, one), []rec.Line{one}, rec.InventoryPartiallyRestocked, missing},
		{"the second SKU returned, not restocked", refunded(twoSKUs(), "R-1", "10.00", -10, rec.Line{SKU: "SKU-2", Quantity: 1}),
			nil, rec.InventoryDeducted, missing},
		{"one unit returned and restocked", refunded(paid(), "R-1", "10.00", -10, one), []rec.Line{one}, rec.InventoryPartiallyRestocked, nil},
		{"one unit returned, both restocked", refunded(paid(), "R-1", "10.00", -10, one), []rec.Line{two}, rec.InventoryRestocked,
			[]want{{rec.ExtraEffect, rec.ServiceInventory, rec.ActionManualReview}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.facts
			f.Inventory.Restocked, f.Inventory.Status = tt.restocked, tt.status
			findings := rec.Compare(f, stuckBefore)
			var got []want
			for _, fd := range findings {
				got = append(got, want{fd.Kind, fd.Service, fd.Action.Type})
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("findings %+v\nwant %+v", findings, tt.want)
			}
			if len(tt.want) > 0 && tt.want[0].action == rec.ActionRepublish && len(findings[0].Action.EventIDs) != len(f.Order.Events) {
				t.Fatalf("republishes %v, want every event of the order", findings[0].Action.EventIDs)
			}
		})
	}
}
