package points_test

import (
	"strconv"
	"testing"

	"github.com/shopspring/decimal"
	"pgregory.net/rapid"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// TestRandomRefundTotalsKeepTheLedgerAtWhatTheOrderIsWorth pays an order
// and applies the running totals of a random sequence of refunds (in parts,
// refunds of no money for goods whose money came back, the rest at the
// end), some of them never (dead-lettered), and, in some sequences, in any
// order (a replay of a stale one). After every event the ledger, summed as
// the repository sums it, holds rules.PointsFor(paid, the largest total
// applied), never goes below zero and never earns on a refund, and its
// reversals' amounts add up to that total; applied in order, the state is
// REVERSED exactly when the whole payment is back.
func TestRandomRefundTotalsKeepTheLedgerAtWhatTheOrderIsWorth(t *testing.T) {
	for round := range 5 {
		t.Run("round "+strconv.Itoa(round), rapid.MakeCheck(refundTotals))
	}
}

func refundTotals(t *rapid.T) {
	paidCents := rapid.Int64Range(1, 1_000_000).Draw(t, "paid cents")
	paid := decimal.New(paidCents, -2)
	// The running totals of the order's refunds; a refund of no money
	// repeats the total before it.
	var totals []decimal.Decimal
	left := paidCents
	for range rapid.IntRange(1, 8).Draw(t, "refunds") {
		var cents int64
		switch {
		case left == 0 || rapid.IntRange(0, 4).Draw(t, "no money") == 0:
		case rapid.Bool().Draw(t, "the rest"):
			cents = left
		default:
			cents = rapid.Int64Range(1, left).Draw(t, "cents")
		}
		left -= cents
		if left == paidCents {
			continue // an order with nothing refunded has no refund event
		}
		totals = append(totals, decimal.New(paidCents-left, -2))
	}
	applied := totals
	inOrder := rapid.Bool().Draw(t, "in order")
	if inOrder {
		applied = nil
		for _, total := range totals {
			if rapid.IntRange(0, 3).Draw(t, "dead-lettered") > 0 {
				applied = append(applied, total)
			}
		}
	} else {
		applied = rapid.Permutation(totals).Draw(t, "order of application")
	}

	ch, err := points.Order{ID: "O-1", State: points.StateNone}.Pay(paid)
	if err != nil {
		t.Fatalf("Pay(%s): %v", paid, err)
	}
	ledger := points.Order{ID: "O-1", State: ch.State, Points: ch.Entry.Points, Paid: ch.Entry.Amount, Refunded: decimal.Zero}
	if ledger.Points != rules.PointsFor(paid, decimal.Zero) {
		t.Fatalf("earned %d for %s, want %d", ledger.Points, paid, rules.PointsFor(paid, decimal.Zero))
	}
	most := decimal.Zero
	for i, total := range applied {
		ch, err := ledger.Refund(total)
		if err != nil {
			t.Fatalf("refund %d (total %s of %s): %v", i, total, paid, err)
		}
		if ch.Entry.Type != points.EntryReversal || ch.Entry.Points > 0 || ch.Entry.Amount.IsNegative() {
			t.Fatalf("refund %d (total %s of %s): entry %+v, want a reversal of no gain", i, total, paid, ch.Entry)
		}
		ledger.State, ledger.Points, ledger.Refunded = ch.State, ledger.Points+ch.Entry.Points, ledger.Refunded.Add(ch.Entry.Amount)
		most = decimal.Max(most, total)
		if want := rules.PointsFor(paid, most); ledger.Points != want || ledger.Points < 0 {
			t.Fatalf("refund %d (total %s of %s, totals applied %v): ledger holds %d points, want %d", i, total, paid, applied[:i+1], ledger.Points, want)
		}
		if !ledger.Refunded.Equal(most) {
			t.Fatalf("refund %d (total %s of %s): reversals add up to %s, want %s", i, total, paid, ledger.Refunded, most)
		}
		if inOrder && (ledger.State == points.StateReversed) != most.Equal(paid) {
			t.Fatalf("refund %d (total %s of %s): state %s", i, total, paid, ledger.State)
		}
	}
}
