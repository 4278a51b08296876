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
// delivered twice, and ten times at once from separate producers.
func TestDuplicateOrderPaidAppliesOnce(t *testing.T) {
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)

	t.Run("twice", func(t *testing.T) {
		paid := s.Events("O-DUP-1", "SKU-1", 2, "80.00").Paid()
		s.Publish(paid)
		s.Publish(paid)
		s.WaitConsumed(paid.EventID, consumers...)
		s.WaitUntil(20*time.Second, "both copies read", func() bool {
			return s.Metric("inventory", "consumer_messages_total", map[string]string{"outcome": "ok"}) >= 2
		})
		if st := s.Inventory("SKU-1"); st.Deducted != 2 {
			t.Errorf("deducted %d, want 2", st.Deducted)
		}
		assertOnce(t, s, "O-DUP-1", paid.EventID)
	})

	t.Run("ten producers at once", func(t *testing.T) {
		paid := s.Events("O-DUP-10", "SKU-1", 3, "120.00").Paid()
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Publish(paid) // each call is its own producer client
			}()
		}
		wg.Wait()
		s.WaitConsumed(paid.EventID, consumers...)
		s.WaitUntil(20*time.Second, "all twelve messages read", func() bool {
			return s.Metric("inventory", "consumer_messages_total", map[string]string{"outcome": "ok"}) >= 12
		})
		if st := s.Inventory("SKU-1"); st.Deducted != 5 {
			t.Errorf("deducted %d, want 2 + 3", st.Deducted)
		}
		assertOnce(t, s, "O-DUP-10", paid.EventID)
	})
}

func assertOnce(t *testing.T, s *harness.Suite, orderID, eventID string) {
	t.Helper()
	for _, svc := range consumers {
		if n := s.ProcessedEventCount(svc, eventID); n != 1 {
			t.Errorf("%s processed-event count %d, want 1", svc, n)
		}
	}
	if n := s.PointsLedgerCount(orderID); n != 1 {
		t.Errorf("ledger rows %d, want 1", n)
	}
	if n := s.NotificationCount(orderID); n != 1 {
		t.Errorf("notifications %d, want 1", n)
	}
}

// The payment provider's callback delivered twice, and ten times at once:
// one state change, one OrderPaid in the outbox.
func TestDuplicateCallbackChangesOnce(t *testing.T) {
	s := harness.Start(t, harness.Options{})
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
	if send() != 200 || send() != 200 {
		t.Fatal("callback not acknowledged")
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
}
