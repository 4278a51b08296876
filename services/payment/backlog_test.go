package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
)

// TestAdminBacklogEndpoints reads both sides of the payment service's
// queues: GET /admin/outbox counts the callback that the order service
// refuses, GET /admin/lag reports the refund consumer's group.
func TestAdminBacklogEndpoints(t *testing.T) {
	orders := &fakeOrderService{}
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == adapters.CallbackPath {
			http.Error(w, `{"businessCode":"UNAVAILABLE"}`, http.StatusServiceUnavailable)
			return
		}
		orders.ServeHTTP(w, r)
	}))
	defer refusing.Close()
	s := start(t, map[string]string{"ORDER_URL": refusing.URL}, true)

	var backlog admin.OutboxBacklog
	s.GetJSON("/admin/outbox", &backlog)
	if backlog.Pending != 0 || backlog.OldestPendingAgeSeconds != 0 {
		t.Fatalf("GET /admin/outbox before any payment = %+v, want empty", backlog)
	}
	if status, body := call(s, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`); status != http.StatusOK {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	s.WaitFor("the refused callback to wait in the outbox", func() bool {
		s.GetJSON("/admin/outbox", &backlog)
		return backlog.Pending == 1 && backlog.OldestPendingAgeSeconds > 0
	})
	if backlog.Events != nil {
		t.Errorf("GET /admin/outbox without aggregateId lists rows: %+v", backlog.Events)
	}
	// ?aggregateId= follows the order's callback through the refusals.
	s.WaitFor("the refused callback to be tried twice", func() bool {
		s.GetJSON("/admin/outbox?aggregateId=O-1", &backlog)
		return len(backlog.Events) == 1 && backlog.Events[0].Attempts >= 2
	})
	if cb := backlog.Events[0]; cb.EventType != string(rules.CallbackPaymentSucceeded) || cb.Status != "PENDING" || cb.NextAttemptAt.IsZero() {
		t.Errorf("the callback row = %+v, want a PENDING PAYMENT_SUCCEEDED with its next attempt", cb)
	}
	var other admin.OutboxBacklog
	s.GetJSON("/admin/outbox?aggregateId=O-2", &other)
	if len(other.Events) != 0 {
		t.Errorf("rows of O-2 = %+v, want none", other.Events)
	}

	code, raw := s.Do(http.MethodGet, "/admin/lag", "")
	var r lag.Report
	if err := json.Unmarshal(raw, &r); code != http.StatusOK || err != nil {
		t.Fatalf("GET /admin/lag = %d %s", code, raw)
	}
	if r.Group != "payment-service" || r.Topic != s.Topic || len(r.Partitions) != 4 || r.TotalLag != 0 {
		t.Errorf("GET /admin/lag = %+v, want group payment-service on %s, 4 partitions, no lag", r, s.Topic)
	}
}
