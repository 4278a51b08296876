package order_test

import (
	"errors"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

func TestFenceVersion(t *testing.T) {
	tests := []struct {
		name        string
		atLeast     int64
		wantMoved   bool
		wantVersion int64
		wantInvalid bool
	}{
		{name: "above the version raises it", atLeast: 7, wantMoved: true, wantVersion: 7},
		{name: "the next version", atLeast: 4, wantMoved: true, wantVersion: 4},
		{name: "at the version changes nothing", atLeast: 3, wantVersion: 3},
		{name: "below the version never lowers it", atLeast: 1, wantVersion: 3},
		{name: "the largest allowed", atLeast: order.MaxFenceVersion, wantMoved: true, wantVersion: order.MaxFenceVersion},
		{name: "zero", atLeast: 0, wantVersion: 3, wantInvalid: true},
		{name: "negative", atLeast: -5, wantVersion: 3, wantInvalid: true},
		{name: "past the largest", atLeast: order.MaxFenceVersion + 1, wantVersion: 3, wantInvalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := paidOrder(t)
			before := o.Clone()
			moved, err := o.FenceVersion(tt.atLeast)
			var rule *rules.RuleError
			if tt.wantInvalid != errors.As(err, &rule) || !tt.wantInvalid && err != nil {
				t.Fatalf("FenceVersion(%d) error %v, want invalid %v", tt.atLeast, err, tt.wantInvalid)
			}
			if moved != tt.wantMoved || o.Version != tt.wantVersion {
				t.Fatalf("FenceVersion(%d) moved %v to version %d, want %v, %d", tt.atLeast, moved, o.Version, tt.wantMoved, tt.wantVersion)
			}
			// Nothing but the version moves: the state, the payment and the
			// refunds are the order's as they were.
			if !o.SameContent(before) || o.Status != before.Status || o.PaymentID != before.PaymentID || len(o.Refunds) != len(before.Refunds) {
				t.Fatalf("the fence changed more than the version: %+v -> %+v", before, o)
			}
		})
	}
}

// After a fence the next change takes the version after the fence: the
// version its consumers have not applied yet.
func TestChangeAfterFenceTakesTheNextVersion(t *testing.T) {
	o := paidOrder(t)
	if _, err := o.FenceVersion(5); err != nil {
		t.Fatal(err)
	}
	events, err := o.RequestRefund(order.RefundRequest{ID: "R-1", Amount: dec("10.00")})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Version != 6 || o.Version != 6 {
		t.Fatalf("refund after a fence at 5: events %+v, order v%d; want one event at version 6", events, o.Version)
	}
}

// paidOrder is a PAID order at version 3.
func paidOrder(t *testing.T) *order.Order {
	t.Helper()
	o, err := order.New("O-1", "C-1", "CNY", items(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Checkout(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ApplyCallback(order.Callback{ID: "CB-1", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1",
		PaymentID: "P-1", Amount: dec("2.00"), Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	if o.Status != order.StatusPaid || o.Version != 3 {
		t.Fatalf("setup: %s v%d, want PAID v3", o.Status, o.Version)
	}
	return o
}
