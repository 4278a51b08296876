// Package e2e_test drives the five services as a black box, as a learner
// would with curl, and checks every side effect by counting it.
package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

func paidSnapshot() harness.Snapshot {
	return harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}
}

// placePaidOrder seeds stock, creates, checks out and pays an order of two
// SKU-1 at 40.00 and waits for the converged snapshot.
func placePaidOrder(t *testing.T, s *harness.Suite, orderID, sku string) {
	t.Helper()
	amount := s.CreateOrder(harness.Order{ID: orderID, Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: sku, Quantity: 2, UnitPrice: "40.00"}}})
	if amount != "80.00" {
		t.Fatalf("order amount %s, want 80.00", amount)
	}
	code, out := s.Pay(orderID, amount, "CNY")
	if code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	took := s.WaitSnapshot(orderID, paidSnapshot(), 30*time.Second)
	t.Logf("%s converged %v after the payment", orderID, took)
}

// Tutorial: "支付成功后的异步业务" — the whole chain converges and every side
// effect happens exactly once.
func TestHappyPathConverges(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	placePaidOrder(t, s, "O-1001", "SKU-1")

	if st := s.Inventory("SKU-1"); st.Available != 98 || st.Deducted != 2 {
		t.Errorf("stock %+v, want available 98, deducted 2", st)
	}
	if n := s.PointsLedgerCount("O-1001"); n != 1 {
		t.Errorf("points ledger rows %d, want 1", n)
	}
	if n := s.NotificationCount("O-1001"); n != 1 {
		t.Errorf("notifications %d, want 1", n)
	}
	points := s.JSON("points", "GET", "/points/orders/O-1001", nil, 200)
	entry := points["entries"].([]any)[0].(map[string]any)
	if entry["points"].(float64) != 80 {
		t.Errorf("points entry %v, want 80 points for 80.00", entry)
	}
	order := s.JSON("order", "GET", "/orders/O-1001", nil, 200)
	if order["status"] != "PAID" || order["version"].(float64) != 3 || order["amount"] != "80.00" {
		t.Errorf("order %v", order)
	}
	checkFailPointsDocumented(t, s)
	if s.ContractChecked() == 0 {
		t.Error("no answer was checked against the services' OpenAPI documents")
	}
}

// Tutorial: refunds reverse every effect once; a refund above what was paid
// is a business rejection, never retried.
func TestRefundPath(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-R", 10)

	t.Run("full refund reverses stock and points", func(t *testing.T) {
		placePaidOrder(t, s, "O-R1", "SKU-R")
		out := s.JSON("order", "POST", "/orders/O-R1/refunds", map[string]any{"items": []any{map[string]any{"sku": "SKU-R", "quantity": 2}}}, 200)
		if out["businessCode"] != "SUCCESS" || out["amount"] != "80.00" {
			t.Fatalf("refund: %v", out)
		}
		s.WaitSnapshot("O-R1", harness.Snapshot{Order: "REFUNDED", OrderVersion: 5, Payment: "REFUNDED",
			Inventory: "RESTOCKED", PointsLedger: 2, Notifications: 2, DLQ: 0}, 30*time.Second)
		if st := s.Inventory("SKU-R"); st.Available != 10 || st.Deducted != 0 {
			t.Errorf("stock after refund %+v, want 10 available, 0 deducted", st)
		}
		points := s.JSON("points", "GET", "/points/orders/O-R1", nil, 200)
		sum := 0.0
		for _, e := range points["entries"].([]any) {
			sum += e.(map[string]any)["points"].(float64)
		}
		if sum != 0 {
			t.Errorf("points after full refund sum to %v, want 0 (earn + reversal)", sum)
		}
	})

	t.Run("refund above the payment is rejected", func(t *testing.T) {
		placePaidOrder(t, s, "O-R2", "SKU-R")
		before := s.Inventory("SKU-R")
		out := s.JSON("order", "POST", "/orders/O-R2/refunds", map[string]any{"amount": "500.00"}, 200)
		if out["businessCode"] != "SUCCESS" || out["status"] != "REFUNDING" {
			t.Fatalf("refund request: %v", out)
		}
		s.WaitUntil(30*time.Second, "order back to PAID at version 5", func() bool {
			o := s.JSON("order", "GET", "/orders/O-R2", nil, 200)
			return o["status"] == "PAID" && o["version"].(float64) == 5
		})
		snap := s.WaitSnapshot("O-R2", harness.Snapshot{Order: "PAID", OrderVersion: 5, Payment: "SUCCEEDED",
			Inventory: "DEDUCTED", PointsLedger: 1, Notifications: 2, DLQ: 0}, 30*time.Second)
		_ = snap
		if after := s.Inventory("SKU-R"); after != before {
			t.Errorf("stock changed by a rejected refund: %+v -> %+v", before, after)
		}
		payment := s.JSON("payment", "GET", "/payments/orders/O-R2", nil, 200)
		if payment["refunded"] != "0.00" {
			t.Errorf("payment after rejected refund %v, want refunded 0.00", payment)
		}
	})
}

// Tutorial: "def test_当支付成功事件短暂失败时_业务最终一致" — the inventory consumer
// fails twice with a retryable error; the payment still answers SUCCESS and
// the order converges with nothing dead-lettered.
func TestEventualConsistencyWhenConsumerFailsTwice(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	s.FailConsumer("inventory", 2)

	s.CreateOrder(harness.Order{ID: "O-1001", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: "40.00"}}})
	code, out := s.Pay("O-1001", "80.00", "CNY")
	if code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitUntil(30*time.Second, "snapshot PAID / DEDUCTED / one ledger entry", func() bool {
		snap := s.Snapshot("O-1001")
		return snap.Order == "PAID" && snap.Inventory == "DEDUCTED" && snap.PointsLedger == 1
	})
	if n := s.DLQCount("O-1001"); n != 0 {
		t.Fatalf("DLQ holds %d records for the order, want 0", n)
	}
	if st := s.Inventory("SKU-1"); st.Deducted != 2 {
		t.Errorf("stock deducted %d after two failures and a success, want exactly 2", st.Deducted)
	}
	s.FailPointFired("inventory", "inventory.apply", 2)
}

// Paying twice, and ten times at once, makes one payment and one state change.
func TestPayingTwiceIsOnePayment(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	s.CreateOrder(harness.Order{ID: "O-TWICE", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: "40.00"}}})

	var wg sync.WaitGroup
	ids := make([]string, 10)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, out := s.Pay("O-TWICE", "40.00", "CNY")
			if code == 200 && out["businessCode"] == "SUCCESS" {
				ids[i], _ = out["paymentId"].(string)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("concurrent payments answered payment ids %v, want one id ten times", ids)
		}
	}
	want := paidSnapshot()
	s.WaitSnapshot("O-TWICE", want, 30*time.Second)
	if st := s.Inventory("SKU-1"); st.Deducted != 1 {
		t.Errorf("stock deducted %d, want 1", st.Deducted)
	}
	events := s.JSON("order", "GET", "/orders/O-TWICE/events", nil, 200)
	paid := 0
	for _, e := range events["events"].([]any) {
		if e.(map[string]any)["eventType"] == "OrderPaid" {
			paid++
		}
	}
	if paid != 1 {
		t.Errorf("order outbox holds %d OrderPaid events, want 1", paid)
	}
}

// Every write endpoint rejects bad input with 400 and a businessCode, an
// oversize body with 413 and an unknown order with 404.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.CreateOrder(harness.Order{ID: "O-BAD", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 1, UnitPrice: "1.00"}}})
	big := `{"customerId":"` + strings.Repeat("x", 2<<20) + `"}`
	tests := []struct {
		service, method, path string
		body                  any
		want                  int
	}{
		{"order", "POST", "/orders", `{"customerId":`, 400},
		{"order", "POST", "/orders", map[string]any{"currency": "CNY", "items": []any{}}, 400},
		{"order", "POST", "/orders", map[string]any{"customerId": "C", "currency": "CNY",
			"items": []any{map[string]any{"sku": "S", "quantity": -1, "unitPrice": "1.00"}}}, 400},
		{"order", "POST", "/orders", map[string]any{"customerId": "C", "currency": "CNY",
			"items": []any{map[string]any{"sku": "S", "quantity": 1, "unitPrice": "abc"}}}, 400},
		{"order", "POST", "/orders", big, 413},
		{"order", "POST", "/orders/O-NOPE/checkout", nil, 404},
		{"order", "POST", "/orders/O-BAD/refunds", map[string]any{"amount": "ten"}, 400},
		{"order", "POST", "/orders/O-NOPE/refunds", map[string]any{"amount": "1.00"}, 404},
		{"order", "GET", "/orders/O-NOPE", nil, 404},
		{"payment", "POST", "/payments", `not json`, 400},
		{"payment", "POST", "/payments", map[string]any{"orderId": "O-BAD", "amount": "1.5.0", "currency": "CNY"}, 400},
		{"payment", "POST", "/payments", map[string]any{"amount": "1.00", "currency": "CNY"}, 400},
		{"payment", "POST", "/payments", map[string]any{"orderId": "O-NOPE", "amount": "1.00", "currency": "CNY"}, 404},
		{"payment", "POST", "/payments", big, 413},
		{"inventory", "PUT", "/inventory/SKU-1", map[string]any{"available": -5}, 400},
		{"inventory", "PUT", "/inventory/SKU-1", `{"available":"many"}`, 400},
		{"inventory", "PUT", "/inventory/SKU-1", big, 413},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %s %d", tt.service, tt.method, tt.path, tt.want), func(t *testing.T) {
			out := s.JSON(tt.service, tt.method, tt.path, tt.body, tt.want)
			if out["businessCode"] == "" || out["businessCode"] == nil || out["message"] == "" || out["message"] == nil {
				t.Errorf("error answer %v lacks businessCode or message", out)
			}
		})
	}
}
