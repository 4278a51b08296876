package e2e_test

import (
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// Tutorial "打乱事件顺序，阻止状态倒退": REFUNDED(v5) reaches the consumers before
// PAID(v3). They park it, apply PAID when it comes, then the refund, in
// version order; a late CREATED(v1) changes nothing.
func TestReorderedEventsApplyInVersionOrder(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-O", 10)
	ev := s.Events("O-ORD", "SKU-O", 4, "40.00")
	refunded, paid, created := ev.Refunded(), ev.Paid(), ev.Created()

	s.Publish(refunded)
	s.WaitConsumed(refunded.EventID, consumers...)
	if st := s.Inventory("SKU-O"); st.Available != 10 || st.Deducted != 0 {
		t.Fatalf("a refund before its payment moved stock: %+v", st)
	}
	if n := s.PointsLedgerCount("O-ORD"); n != 0 {
		t.Fatalf("a refund before its payment wrote %d ledger rows", n)
	}

	s.Publish(paid)
	// Each consumer applies them on its own time: wait for both the stock
	// and the ledger before reading either.
	s.WaitUntil(20*time.Second, "payment and parked refund applied", func() bool {
		inv := s.JSON("inventory", "GET", "/inventory/orders/O-ORD", nil, 200)
		return inv["status"] == "RESTOCKED" && s.PointsLedgerCount("O-ORD") == 2
	})
	if st := s.Inventory("SKU-O"); st.Available != 10 || st.Deducted != 0 {
		t.Errorf("stock not conserved: %+v", st)
	}
	entries := s.JSON("points", "GET", "/points/orders/O-ORD", nil, 200)["entries"].([]any)
	if len(entries) != 2 || entries[0].(map[string]any)["points"].(float64) != 40 || entries[1].(map[string]any)["points"].(float64) != -40 {
		t.Errorf("ledger %v, want +40 then -40", entries)
	}
	s.WaitUntil(20*time.Second, "two notifications", func() bool { return s.NotificationCount("O-ORD") == 2 })
	items := s.JSON("notification", "GET", "/notifications?orderId=O-ORD", nil, 200)["items"].([]any)
	if items[0].(map[string]any)["eventId"] != paid.EventID || items[1].(map[string]any)["eventId"] != refunded.EventID {
		t.Errorf("notifications %v, want the payment's before the refund's", items)
	}

	s.Publish(created)
	s.WaitConsumed(paid.EventID, consumers...)
	s.WaitUntil(20*time.Second, "late CREATED read", func() bool {
		return s.Metric("inventory", "consumer_messages_total", map[string]string{"outcome": "ok"}) >= 3
	})
	if inv := s.JSON("inventory", "GET", "/inventory/orders/O-ORD", nil, 200); inv["status"] != "RESTOCKED" {
		t.Errorf("late CREATED moved inventory back to %v", inv["status"])
	}
	if n := s.PointsLedgerCount("O-ORD"); n != 2 {
		t.Errorf("late CREATED changed the ledger to %d rows", n)
	}
}
