package reconciliation_test

import (
	"slices"
	"testing"
	"time"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// TestRefundMissingFromTheLedgerIsReported: the order waits for refund R-2
// and the payment service's ledger holds only the earlier R-1: the request
// never reached the payment service, so its events are published again.
// With R-2 in the ledger (executed, the order not yet told) the payment
// side has nothing missing.
func TestRefundMissingFromTheLedgerIsReported(t *testing.T) {
	requested := func(inLedger bool) rec.Facts {
		f := refunded(paid(), "R-1", "5.00", -5)
		f.Order.Status = rec.StatusRefunding
		f.Order.Refunds = append(f.Order.Refunds, rec.Refund{ID: "R-2", Kind: rec.KindRefund, PaymentID: "P-1", Amount: dec("3.00"),
			Currency: "CNY", Status: rec.RefundRequested})
		if inLedger {
			f.Payment.Refunds = append(f.Payment.Refunds, rec.PaymentRefund{ID: "R-2", Amount: dec("3.00"), Status: "REJECTED"})
		}
		return f
	}
	for _, tt := range []struct {
		name     string
		inLedger bool
		want     []want
	}{
		{"R-2 not in the ledger", false, []want{{rec.MissingEffect, rec.ServicePayment, rec.ActionRepublish}}},
		{"R-2 in the ledger", true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []want
			for _, f := range rec.Compare(requested(tt.inLedger), stuckBefore) {
				if f.Service == rec.ServicePayment {
					got = append(got, want{f.Kind, f.Service, f.Action.Type})
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("payment findings %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestLastEffectAtCountsEveryServiceThatActed: the end of an order's
// convergence is the latest effect any service committed, the inventory's
// included once it has acted on the order.
func TestLastEffectAtCountsEveryServiceThatActed(t *testing.T) {
	f := paid()
	f.Payment.UpdatedAt = t0.Add(time.Second)
	f.Inventory.UpdatedAt = t0.Add(2 * time.Second)
	if got := f.LastEffectAt(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("LastEffectAt() = %s, want the inventory's %s", got, t0.Add(2*time.Second))
	}
	f.Inventory = rec.Inventory{Status: rec.InventoryNone, UpdatedAt: t0.Add(3 * time.Second)}
	if got := f.LastEffectAt(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("LastEffectAt() = %s with inventory NONE, want the payment's %s", got, t0.Add(time.Second))
	}
}
