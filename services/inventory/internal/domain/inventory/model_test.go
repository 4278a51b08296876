package inventory_test

import (
	"maps"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// TestRandomReturnTotalsRestockEachUnitOnce pays an order (from stock that
// covers it or, in some sequences, does not) and applies the running
// returned totals of a random sequence of refunds (goods in parts, money
// alone, the rest), some never (dead-lettered), some twice (redelivered)
// and, in some sequences, in any order. After every event the stock moved
// is what the model says: each SKU is restocked min(returned, ordered) of
// the largest total applied, never more than was deducted and never a unit
// twice; stock available is what it was less what the order still holds;
// a rejected order moves nothing.
func TestRandomReturnTotalsRestockEachUnitOnce(t *testing.T) {
	for round := range 5 {
		t.Run("round "+strconv.Itoa(round), rapid.MakeCheck(returnTotals))
	}
}

func returnTotals(t *rapid.T) {
	var lines []inventory.Line
	ordered := map[string]int{}
	initial := map[string]int{}
	short := rapid.IntRange(0, 4).Draw(t, "short of stock") == 0
	for i := range rapid.IntRange(1, 3).Draw(t, "skus") {
		sku := "SKU-" + strconv.Itoa(i)
		n := rapid.IntRange(1, 5).Draw(t, "quantity")
		lines = append(lines, inventory.Line{SKU: sku, Quantity: n})
		ordered[sku] = n
		initial[sku] = n + rapid.IntRange(0, 3).Draw(t, "spare")
	}
	if short {
		initial["SKU-0"] = ordered["SKU-0"] - 1
	}

	// The running totals of the goods the refunds returned. The order
	// service never returns more than was ordered; the last total, at
	// times, claims more to see that inventory caps it anyway.
	var totals []map[string]int
	returned := map[string]int{}
	for range rapid.IntRange(1, 6).Draw(t, "refunds") {
		for _, l := range lines {
			if left := l.Quantity - returned[l.SKU]; left > 0 && rapid.Bool().Draw(t, "return "+l.SKU) {
				returned[l.SKU] += rapid.IntRange(1, left).Draw(t, "of "+l.SKU)
			}
		}
		totals = append(totals, maps.Clone(returned))
	}
	if rapid.IntRange(0, 4).Draw(t, "claims too much") == 0 {
		more := maps.Clone(returned)
		more["SKU-0"] = ordered["SKU-0"] + 1
		totals = append(totals, more)
	}
	var applied []map[string]int
	if rapid.Bool().Draw(t, "in order") {
		for _, total := range totals {
			for range rapid.SampledFrom([]int{0, 1, 1, 1, 2}).Draw(t, "deliveries") {
				applied = append(applied, total)
			}
		}
	} else {
		applied = rapid.Permutation(totals).Draw(t, "order of application")
	}

	stock := maps.Clone(initial)
	ch, err := inventory.Order{ID: "O-1", Status: inventory.StatusNone}.Pay(lines, stock)
	if err != nil {
		t.Fatalf("Pay: %v", err)
	}
	move(stock, ch.Movements)
	o := ch.Order
	if short != (o.Status == inventory.StatusRejected) {
		t.Fatalf("paid %v from %v: status %s", lines, initial, o.Status)
	}
	most := map[string]int{}
	for i, total := range applied {
		ch, err := o.Refund(asLines(total))
		if err != nil {
			t.Fatalf("refund %d (%v): %v", i, total, err)
		}
		for _, m := range ch.Movements {
			if m.Kind != inventory.KindRestock || m.Delta <= 0 {
				t.Fatalf("refund %d (%v): movement %+v, want a restock", i, total, m)
			}
		}
		move(stock, ch.Movements)
		o = ch.Order
		for sku, n := range total {
			most[sku] = max(most[sku], min(n, ordered[sku]))
		}
		for sku, n := range ordered {
			holds := n - most[sku] // what the order still holds
			if short {
				holds = 0 // it never took anything
			}
			if want := initial[sku] - holds; stock[sku] != want {
				t.Fatalf("refund %d (totals applied %v): %s available %d, want %d", i, applied[:i+1], sku, stock[sku], want)
			}
		}
		if short {
			if o.Status != inventory.StatusRejected {
				t.Fatalf("refund %d of a rejected order: status %s", i, o.Status)
			}
			continue
		}
		restocked := map[string]int{}
		for _, l := range o.Restocked {
			restocked[l.SKU] = l.Quantity
		}
		if !maps.Equal(restocked, nonZero(most)) {
			t.Fatalf("refund %d (totals applied %v): restocked %v, want %v", i, applied[:i+1], restocked, nonZero(most))
		}
		want := inventory.StatusDeducted
		switch {
		case maps.Equal(nonZero(most), ordered):
			want = inventory.StatusRestocked
		case len(nonZero(most)) > 0:
			want = inventory.StatusPartiallyRestocked
		}
		if o.Status != want {
			t.Fatalf("refund %d (totals applied %v): status %s, want %s", i, applied[:i+1], o.Status, want)
		}
	}
}

// move applies movements to the stock available.
func move(stock map[string]int, moves []inventory.Movement) {
	for _, m := range moves {
		stock[m.SKU] += m.Delta
	}
}

func asLines(total map[string]int) []inventory.Line {
	var out []inventory.Line
	for sku, n := range total {
		if n > 0 {
			out = append(out, inventory.Line{SKU: sku, Quantity: n})
		}
	}
	return out
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
