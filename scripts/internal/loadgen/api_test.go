package loadgen_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// fakeSuite plays the order, payment and inventory services: it keeps
// each order's status and records every call.
type fakeSuite struct {
	mu     sync.Mutex
	status map[string]string // orderId → status
	stock  map[string]string // sku → PUT body
	calls  map[string]int    // "POST /orders" → count
	// failPay makes POST /payments fail for this order.
	failPay string
}

func newFakeSuite() *fakeSuite {
	return &fakeSuite{status: map[string]string{}, stock: map[string]string{}, calls: map[string]int{}}
}

func (f *fakeSuite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	var req struct {
		OrderID string `json:"orderId"`
		Items   []struct {
			SKU string `json:"sku"`
		} `json:"items"`
		Amount string `json:"amount"`
	}
	_ = json.Unmarshal(body, &req)
	answer := func(code, status string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"businessCode":%q,"status":%q}`, code, status)
	}
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/inventory/"):
		f.calls["PUT /inventory"]++
		f.stock[strings.TrimPrefix(r.URL.Path, "/inventory/")] = string(body)
		answer("", "")
	case r.Method == http.MethodPost && r.URL.Path == "/orders":
		f.calls["POST /orders"]++
		if len(req.Items) != 1 {
			http.Error(w, `{"businessCode":"INVALID_REQUEST"}`, http.StatusBadRequest)
			return
		}
		if _, ok := f.status[req.OrderID]; !ok {
			f.status[req.OrderID] = "CREATED"
		}
		answer("SUCCESS", f.status[req.OrderID])
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/checkout"):
		f.calls["POST /checkout"]++
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/orders/"), "/checkout")
		f.status[id] = "PENDING_PAYMENT"
		answer("SUCCESS", f.status[id])
	case r.Method == http.MethodPost && r.URL.Path == "/payments":
		f.calls["POST /payments"]++
		if req.OrderID == f.failPay {
			http.Error(w, `{"businessCode":"INTERNAL_ERROR"}`, http.StatusInternalServerError)
			return
		}
		if req.Amount != loadgen.UnitPrice {
			answer("AMOUNT_MISMATCH", "")
			return
		}
		f.status[req.OrderID] = "PAID"
		answer("SUCCESS", "")
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeSuite) count(call string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[call]
}

func apiConfig(url string, count int) loadgen.Config {
	return loadgen.Config{Via: loadgen.ViaAPI, Count: count, RunID: "api-1", SKUs: 3, Concurrency: 4, Batch: 1,
		SeedStock: 5, MaxErrors: 10, OrderURL: url, PaymentURL: url, InventoryURL: url}
}

func TestPublishViaAPIWalksEveryOrder(t *testing.T) {
	suite := newFakeSuite()
	srv := httptest.NewServer(suite)
	defer srv.Close()
	const count = 20

	res, err := loadgen.Run(context.Background(), apiConfig(srv.URL, count), io.Discard, io.Discard)
	if err != nil || res.Published != count || res.SeededSKUs != 3 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	for call, want := range map[string]int{"PUT /inventory": 3, "POST /orders": count, "POST /checkout": count, "POST /payments": count} {
		if got := suite.count(call); got != want {
			t.Errorf("%s called %d times, want %d", call, got, want)
		}
	}
	for k := 1; k <= 3; k++ {
		if got := suite.stock[loadgen.SKU("api-1", k)]; got != `{"available":5}` {
			t.Errorf("stock of %s set to %q", loadgen.SKU("api-1", k), got)
		}
	}
	for i := 1; i <= count; i++ {
		if got := suite.status[loadgen.OrderID("api-1", i)]; got != "PAID" {
			t.Errorf("order %d is %q, want PAID", i, got)
		}
	}

	// A re-run finds the orders paid and pays nothing twice.
	if res, err := loadgen.Run(context.Background(), apiConfig(srv.URL, count), io.Discard, io.Discard); err != nil || res.Published != count {
		t.Fatalf("re-run = %+v, %v", res, err)
	}
	if got := suite.count("POST /payments"); got != count {
		t.Errorf("after the re-run POST /payments was called %d times, want still %d", got, count)
	}
}

func TestPublishViaAPICountsFailedOrders(t *testing.T) {
	suite := newFakeSuite()
	suite.failPay = loadgen.OrderID("api-1", 7)
	srv := httptest.NewServer(suite)
	defer srv.Close()

	var stdout strings.Builder
	res, err := loadgen.Run(context.Background(), apiConfig(srv.URL, 10), &stdout, io.Discard)
	if err == nil || res.Published != 9 || res.Failed != 1 {
		t.Fatalf("Run = %+v, %v; want 9 published, 1 failed and an error", res, err)
	}
	if !strings.Contains(err.Error(), "orders 7") || !strings.Contains(stdout.String(), "errors            1") {
		t.Errorf("error %q / summary %q should name order 7 and one error", err, stdout.String())
	}
}

func TestPublishStopsAfterMaxErrors(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	cfg := apiConfig(down.URL, 1000)
	cfg.SeedStock, cfg.Concurrency, cfg.MaxErrors = 0, 1, 3
	res, err := loadgen.Run(context.Background(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--max-errors 3") || res.Failed != 3 {
		t.Fatalf("Run = %+v, %v; want a stop after 3 failures", res, err)
	}
}
