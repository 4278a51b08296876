package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// keyedAnswer is an answer to a request with an Idempotency-Key.
type keyedAnswer struct {
	status   int
	body     string
	replayed bool
	out      map[string]any
}

// sendKeyed sends body to a service's path with an Idempotency-Key, as a
// client retrying after a lost answer does.
func sendKeyed(t *testing.T, s *harness.Suite, service, path, key, body string) keyedAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL(service)+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := keyedAnswer{status: resp.StatusCode, body: string(raw), replayed: resp.Header.Get("Idempotent-Replayed") == "true"}
	_ = json.Unmarshal(raw, &a.out) // judged by the test
	return a
}

// A refund of 30.00 and one unit of an 80.00 order, sent twice with one
// key as a client retrying after a timeout does, is one refund: the
// second answer is the first, marked as a replay, and the order, the
// payment's ledger and the stock each show one refund. Even once the key
// is gone (its first run died before its answer was stored, or the key
// expired), the same request finds the refund it made, since the refund's
// id derives from the key.
func TestRetriedRefundWithAKeyRefundsOnce(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-I", 10)
	amount := s.CreateOrder(harness.Order{ID: "O-I1", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-I", Quantity: 2, UnitPrice: "40.00"}}})
	if code, out := s.Pay("O-I1", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-I1", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1}, 30*time.Second)

	const key, body = "refund-O-I1-1", `{"amount":"30.00","items":[{"sku":"SKU-I","quantity":1}]}`
	first := sendKeyed(t, s, "order", "/orders/O-I1/refunds", key, body)
	if first.status != 200 || first.out["businessCode"] != "SUCCESS" || first.replayed {
		t.Fatalf("first refund: %d %s replayed=%v", first.status, first.body, first.replayed)
	}
	retry := sendKeyed(t, s, "order", "/orders/O-I1/refunds", key, body)
	if retry.status != first.status || retry.body != first.body || !retry.replayed {
		t.Fatalf("retry: %d %s replayed=%v, want the first answer %s replayed", retry.status, retry.body, retry.replayed, first.body)
	}
	order := s.JSON("order", "GET", "/orders/O-I1", nil, 200)
	if refunds := order["refunds"].([]any); len(refunds) != 1 || order["version"] != 4.0 {
		t.Fatalf("after the retry the order has %d refunds at version %v: %v", len(refunds), order["version"], order)
	}
	if other := sendKeyed(t, s, "order", "/orders/O-I1/refunds", key, `{"amount":"31.00"}`); other.status != 422 ||
		other.out["businessCode"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("the key with another body: %d %s", other.status, other.body)
	}

	s.WaitSnapshot("O-I1", harness.Snapshot{Order: "PARTIALLY_REFUNDED", OrderVersion: 5, Payment: "PARTIALLY_REFUNDED",
		Inventory: "PARTIALLY_RESTOCKED", PointsLedger: 2, Notifications: 2}, 30*time.Second)
	// The key's row is gone, as after a crash between the refund's commit
	// and storing its answer: the request runs again and finds its refund.
	if _, err := s.DB("order").Exec(`DELETE FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	rerun := sendKeyed(t, s, "order", "/orders/O-I1/refunds", key, body)
	if rerun.status != 200 || rerun.out["businessCode"] != "SUCCESS" || rerun.out["refundId"] != first.out["refundId"] || rerun.replayed {
		t.Fatalf("the request run again: %d %s, want SUCCESS with refund %v", rerun.status, rerun.body, first.out["refundId"])
	}
	order = s.JSON("order", "GET", "/orders/O-I1", nil, 200)
	if refunds := order["refunds"].([]any); len(refunds) != 1 || order["refundedAmount"] != "30.00" || order["version"] != 5.0 {
		t.Fatalf("the order: %d refunds, refunded %v, version %v", len(refunds), order["refundedAmount"], order["version"])
	}
	payment := s.JSON("payment", "GET", "/payments/orders/O-I1", nil, 200)
	if payment["refunded"] != "30.00" {
		t.Fatalf("the payment refunded %v, want 30.00", payment["refunded"])
	}
	ledger := s.JSON("payment", "POST", "/admin/reconciliation/orders", map[string]any{"orderIds": []string{"O-I1"}}, 200)
	if refunds := ledger["orders"].([]any)[0].(map[string]any)["refunds"].([]any); len(refunds) != 1 {
		t.Fatalf("the payment's ledger has %d refunds: %v", len(refunds), refunds)
	}
	if st := s.Inventory("SKU-I"); st.Available != 9 || st.Deducted != 1 {
		t.Fatalf("stock %+v, want 9 available and 1 deducted: one unit back", st)
	}
}

// POST /orders without an orderId, retried with its key, makes one order:
// the retry answers the first's orderId, and so does a run after the key
// is gone, since the order's id derives from the key.
func TestRetriedCreateWithAKeyMakesOneOrder(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	const key, body = "create-C-IDEM-1", `{"customerId":"C-IDEM","currency":"CNY","items":[{"sku":"SKU-I","quantity":1,"unitPrice":"40.00"}]}`
	first := sendKeyed(t, s, "order", "/orders", key, body)
	id, _ := first.out["orderId"].(string)
	if first.status != 200 || first.out["businessCode"] != "SUCCESS" || id == "" || first.replayed {
		t.Fatalf("first create: %d %s", first.status, first.body)
	}
	retry := sendKeyed(t, s, "order", "/orders", key, body)
	if retry.status != 200 || retry.body != first.body || !retry.replayed {
		t.Fatalf("retry: %d %s replayed=%v, want the first answer %s replayed", retry.status, retry.body, retry.replayed, first.body)
	}
	if _, err := s.DB("order").Exec(`DELETE FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	rerun := sendKeyed(t, s, "order", "/orders", key, body)
	if rerun.status != 200 || rerun.out["orderId"] != id || rerun.replayed {
		t.Fatalf("the request run again: %d %s, want order %s", rerun.status, rerun.body, id)
	}
	other := sendKeyed(t, s, "order", "/orders", "create-C-IDEM-2", body)
	if other.status != 200 || other.out["orderId"] == id {
		t.Fatalf("another key: %d %s, want another order", other.status, other.body)
	}
	var n int
	if err := s.DB("order").Get(&n, `SELECT count(*) FROM orders WHERE customer_id = 'C-IDEM'`); err != nil || n != 2 {
		t.Fatalf("%d orders of the customer (%v), want 2: one per key", n, err)
	}
}
