package e2e_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// One set of business rules: whatever the order service accepts, every
// consumer applies. The orders below sit on every limit the rules set (the
// longest ids, the most lines, the largest quantity, the smallest price,
// the largest amount); each must converge with nothing dead-lettered.
func TestEverythingTheOrderServiceAcceptsConverges(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	long := func(prefix string, i int) string {
		id := fmt.Sprintf("%s-%03d-", prefix, i)
		return id + strings.Repeat("x", 128-len(id))
	}

	var lines []harness.Item
	for i := range 100 {
		sku := long("SKU", i)
		s.SetStock(sku, 1_000_000)
		lines = append(lines, harness.Item{SKU: sku, Quantity: 1, UnitPrice: "0.01"})
	}
	lines[0].Quantity, lines[0].UnitPrice = 1_000_000, "9999999.99"

	orders := []struct {
		name   string
		order  harness.Order
		amount string
		points string
	}{
		{"longest ids, most lines, largest quantity, smallest price",
			harness.Order{ID: long("O", 1), Customer: long("C", 1), Currency: "CNY", Items: lines},
			"9999999990000.99", "9999999990000"},
		{"largest amount",
			harness.Order{ID: "O-MAX", Customer: "C-MAX", Currency: "CNY",
				Items: []harness.Item{{SKU: lines[1].SKU, Quantity: 1, UnitPrice: "9999999999999999.99"}}},
			"9999999999999999.99", "9999999999999999"},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			amount := s.CreateOrder(o.order)
			if amount != o.amount {
				t.Fatalf("amount %s, want %s", amount, o.amount)
			}
			if code, out := s.Pay(o.order.ID, amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
				t.Fatalf("pay: %d %v", code, out)
			}
			s.WaitSnapshot(o.order.ID, paidSnapshot(), 30*time.Second)
			// Read as text: the largest figure is beyond a float64's integers.
			if _, raw := s.Call("points", "GET", "/points/orders/"+o.order.ID, nil); !strings.Contains(string(raw), `"points":`+o.points+`,`) {
				t.Errorf("points entry %s, want %s points", raw, o.points)
			}
			if n := s.DLQCount(o.order.ID); n != 0 {
				t.Errorf("%d dead letters", n)
			}
		})
	}
	if st := s.Inventory(lines[0].SKU); st.Available != 0 || st.Deducted != 1_000_000 {
		t.Errorf("stock of the largest line %+v, want all 1000000 deducted", st)
	}
}
