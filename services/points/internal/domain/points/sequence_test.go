package points_test

import (
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// TestRefundsInSequence folds each refund's reversal into the order, as
// the ledger does, before the next refund is decided: an earlier refund
// counts once, so every reversal takes only what its own refund changed
// and the order is worth floor(paid − refunded so far) points after each.
func TestRefundsInSequence(t *testing.T) {
	type step struct {
		total        string // the order's running refunded total
		wantReversed int64
		wantAmount   string
		wantState    points.State
		wantWorth    int64
	}
	tests := []struct {
		name  string
		paid  string
		steps []step
	}{
		{"three refunds to the whole amount", "80.50", []step{
			{"10.00", -10, "10.00", points.StatePartiallyReversed, 70},
			{"30.00", -20, "20.00", points.StatePartiallyReversed, 50},
			{"80.50", -50, "50.50", points.StateReversed, 0},
		}},
		{"refunds of cents cross whole units only now and then", "80.50", []step{
			{"0.75", -1, "0.75", points.StatePartiallyReversed, 79},
			{"1.50", 0, "0.75", points.StatePartiallyReversed, 79},
			{"2.25", -1, "0.75", points.StatePartiallyReversed, 78},
		}},
		{"a refund whose predecessor was never applied here", "80.50", []step{
			{"10.00", -10, "10.00", points.StatePartiallyReversed, 70},
			{"40.00", -30, "30.00", points.StatePartiallyReversed, 40},
			{"45.00", -5, "5.00", points.StatePartiallyReversed, 35},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paid := dec(tt.paid)
			earn, err := points.Order{ID: "O-1", State: points.StateNone}.Pay(paid)
			if err != nil {
				t.Fatal(err)
			}
			o := points.Order{ID: "O-1", State: earn.State, Points: earn.Entry.Points, Paid: paid, Refunded: decimal.Zero}
			for i, s := range tt.steps {
				ch, err := o.Refund(dec(s.total))
				if err != nil {
					t.Fatalf("refund %d (total %s): %v", i+1, s.total, err)
				}
				if ch.Entry.Type != points.EntryReversal || ch.Entry.Points != s.wantReversed || !ch.Entry.Amount.Equal(dec(s.wantAmount)) || ch.State != s.wantState {
					t.Fatalf("refund %d (total %s): %+v, want a reversal of %d points for %s, %s", i+1, s.total, ch, s.wantReversed, s.wantAmount, s.wantState)
				}
				o.State, o.Points, o.Refunded = ch.State, o.Points+ch.Entry.Points, o.Refunded.Add(ch.Entry.Amount)
				if o.Points != s.wantWorth || !o.Refunded.Equal(dec(s.total)) {
					t.Fatalf("after refund %d: %d points, reversals of %s, want %d points, %s", i+1, o.Points, o.Refunded, s.wantWorth, s.total)
				}
			}
		})
	}
}
