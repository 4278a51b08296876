package e2e_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

var consumers = []string{"inventory", "points", "notification"}

// Tutorial: "def test_当支付事件重复投递时_库存只扣减一次" — the same OrderPaid
// delivered twice, and ten times at once from separate producers. The
// copies must be recognised as duplicates by the inbox of every consumer:
// the version guard would ignore a stale copy and the unique keys of
// stock_movements, points_ledger and notifications would turn a second
// effect into a dead letter, so effect counts of one alone do not show
// deduplication at work (docs/drills.md, Tests that can fail).
func TestDuplicateOrderPaidAppliesOnce(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)

	tests := []struct {
		name, orderID string
		quantity      int
		copies        int
		// deducted is SKU-1's deducted stock after this case and the ones before.
		deducted int
	}{
		{"twice", "O-DUP-1", 2, 2, 2},
		{"ten producers at once", "O-DUP-10", 3, 10, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paid := s.Events(tt.orderID, "SKU-1", tt.quantity, "80.00").Paid()
			readers := append([]string{"payment"}, consumers...)
			before := s.Tallies(readers...)
			var wg sync.WaitGroup
			for range tt.copies {
				wg.Go(func() { s.Publish(paid) }) // each call is its own producer client
			}
			wg.Wait()
			read := map[string]int{}
			for _, svc := range readers {
				read[svc] = tt.copies
			}
			since := s.WaitRead(30*time.Second, before, read)

			if st := s.Inventory("SKU-1"); st.Deducted != tt.deducted {
				t.Errorf("deducted %d, want %d", st.Deducted, tt.deducted)
			}
			for _, svc := range consumers {
				if d := s.Dedup(svc, paid.EventID); d.Count != 1 || d.Duplicates != tt.copies-1 {
					t.Errorf("%s: dedup record %+v of %d copies, want 1 row and %d duplicates", svc, d, tt.copies, tt.copies-1)
				}
				got := since[svc].Outcomes
				if got["APPLIED"] != 1 || got["DUPLICATE"] != float64(tt.copies-1) {
					t.Errorf("%s: outcomes %v of %d copies, want APPLIED 1 and DUPLICATE %d", svc, got, tt.copies, tt.copies-1)
				}
			}
			// Payment has no transition for OrderPaid: it reads every copy
			// and records none.
			if got := since["payment"].Outcomes; got["NOT_HANDLED"] != float64(tt.copies) {
				t.Errorf("payment: outcomes %v, want NOT_HANDLED %d", got, tt.copies)
			}
			for _, svc := range readers {
				if n := s.DeadLetters(svc, tt.orderID); n != 0 {
					t.Errorf("%s dead-lettered %d messages of %s, want none", svc, n, tt.orderID)
				}
			}
			if n := s.PointsLedgerCount(tt.orderID); n != 1 {
				t.Errorf("ledger rows %d, want 1", n)
			}
			if n := s.NotificationCount(tt.orderID); n != 1 {
				t.Errorf("notifications %d, want 1", n)
			}
		})
	}
}

// The payment provider's callback delivered twice, and ten times at once:
// one state change, one OrderPaid in the outbox, and downstream one copy of
// it, applied once by every consumer.
func TestDuplicateCallbackChangesOnce(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	s.CreateOrder(harness.Order{ID: "O-CB", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: "10.00"}}})
	body, _ := json.Marshal(map[string]string{"callbackId": "CB-1", "type": "PAYMENT_SUCCEEDED", "orderId": "O-CB",
		"paymentId": "P-CB", "amount": "10.00", "currency": "CNY"})
	send := func() int {
		req, _ := http.NewRequest("POST", s.URL("order")+"/payments/callback", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range event.CallbackHeaders([]byte(harness.CallbackSecret), time.Now(), body) {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 2 {
		if got := send(); got != 200 {
			t.Fatalf("callback %d answered %d, want 200", i+1, got)
		}
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := send(); code != 200 {
				t.Errorf("concurrent callback answered %d", code)
			}
		}()
	}
	wg.Wait()
	paid := 0
	for _, r := range s.OutboxRows("order", "O-CB") {
		if r.EventType == "OrderPaid" {
			paid++
		}
	}
	if paid != 1 {
		t.Fatalf("%d OrderPaid rows after 12 callbacks, want 1", paid)
	}
	order := s.JSON("order", "GET", "/orders/O-CB", nil, 200)
	if order["status"] != "PAID" || order["version"].(float64) != 3 {
		t.Fatalf("order %v, want PAID v3", order)
	}
	var recorded int
	if err := s.DB("order").Get(&recorded, `SELECT count(*) FROM processed_callbacks WHERE callback_id = 'CB-1'`); err != nil {
		t.Fatal(err)
	}
	if recorded != 1 {
		t.Errorf("%d processed_callbacks rows for CB-1, want 1", recorded)
	}

	// Every consumer reads OrderCreated, OrderCheckedOut and the one OrderPaid.
	row := s.OutboxRow("order", "O-CB", "OrderPaid")
	s.WaitUntil(20*time.Second, "OrderPaid relayed", func() bool { return s.OutboxRow("order", "O-CB", "OrderPaid").Status == "SENT" })
	if n := s.TopicCount(row.EventID); n != 1 {
		t.Errorf("OrderPaid is on the topic %d times, want 1", n)
	}
	read := map[string]int{"payment": 3}
	for _, svc := range consumers {
		read[svc] = 3
	}
	since := s.WaitRead(30*time.Second, nil, read)
	for _, svc := range consumers {
		if d := s.Dedup(svc, row.EventID); d.Count != 1 || d.Duplicates != 0 {
			t.Errorf("%s: dedup record %+v, want 1 row and no duplicates", svc, d)
		}
		if got := since[svc].Outcomes; got["APPLIED"] != 1 || got["DUPLICATE"] != 0 {
			t.Errorf("%s: outcomes %v, want APPLIED 1 and no DUPLICATE", svc, got)
		}
	}
	for svc := range read {
		if n := s.DeadLetters(svc, "O-CB"); n != 0 {
			t.Errorf("%s dead-lettered %d messages of O-CB, want none", svc, n)
		}
	}
	if st := s.Inventory("SKU-1"); st.Deducted != 1 {
		t.Errorf("deducted %d, want 1", st.Deducted)
	}
	if n := s.PointsLedgerCount("O-CB"); n != 1 {
		t.Errorf("ledger rows %d, want 1", n)
	}
	if n := s.NotificationCount("O-CB"); n != 1 {
		t.Errorf("notifications %d, want 1", n)
	}
}
