package points_test

import (
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestPay(t *testing.T) {
	tests := []struct {
		name       string
		order      points.Order
		amount     string
		wantPoints int64
		wantErr    bool
	}{
		{"earns one point per whole unit", points.Order{State: points.StateNone}, "80.50", 80, false},
		// The largest amount the order service accepts: more than an INT
		// holds, so the ledger is BIGINT.
		{"the largest amount", points.Order{State: points.StateNone}, "9999999999999999.99", 9999999999999999, false},
		{"paid twice is illegal", points.Order{State: points.StateEarned, Points: 80}, "80.00", 0, true},
		{"an amount beyond the rules", points.Order{State: points.StateNone}, "10000000000000000", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := tt.order.Pay(dec(tt.amount))
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if ch.State != points.StateEarned || ch.Entry.Type != points.EntryEarn || ch.Entry.Points != tt.wantPoints || !ch.Entry.Amount.Equal(dec(tt.amount)) {
				t.Fatalf("change %+v, want EARN %d", ch, tt.wantPoints)
			}
		})
	}
}

// TestRefund: after each refund the order is worth floor(paid − refunded)
// points, whatever the refunds before it, and one reversal is written per
// refund.
func TestRefund(t *testing.T) {
	earned := points.Order{State: points.StateEarned, Points: 20, Paid: dec("20.00")}
	partly := points.Order{State: points.StatePartiallyReversed, Points: 19, Paid: dec("20.00"), Refunded: dec("0.01")}
	tests := []struct {
		name       string
		order      points.Order
		total      string
		wantState  points.State
		wantPoints int64
		wantAmount string
		wantErr    error
	}{
		// The case: 0.01 of a 20.00 order makes it worth 19 points.
		{"a cent of twenty", earned, "0.01", points.StatePartiallyReversed, -1, "0.01", nil},
		{"a refund within the same whole unit", partly, "0.50", points.StatePartiallyReversed, 0, "0.49", nil},
		{"the rest", partly, "20.00", points.StateReversed, -19, "19.99", nil},
		{"everything at once", earned, "20.00", points.StateReversed, -20, "20.00", nil},
		{"an earlier refund never applied here", earned, "10.01", points.StatePartiallyReversed, -11, "10.01", nil},
		{"after the first release rejected a reversal", points.Order{State: points.StateReversalRejected, Points: 20, Paid: dec("20")},
			"5", points.StatePartiallyReversed, -5, "5", nil},
		{"before earning is illegal", points.Order{State: points.StateNone}, "1.00", "", 0, "", points.ErrIllegalTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := tt.order.Refund(dec(tt.total))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if ch.State != tt.wantState || ch.Entry.Type != points.EntryReversal || ch.Entry.Points != tt.wantPoints || !ch.Entry.Amount.Equal(dec(tt.wantAmount)) {
				t.Fatalf("change %+v, want %s, %d points for %s", ch, tt.wantState, tt.wantPoints, tt.wantAmount)
			}
			if after := tt.order.Points + ch.Entry.Points; after != rules.PointsFor(tt.order.Paid, dec(tt.total)) || after < 0 {
				t.Fatalf("order worth %d points after, want %d", after, rules.PointsFor(tt.order.Paid, dec(tt.total)))
			}
		})
	}
}
