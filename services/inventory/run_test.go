package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/ports"
)

// instance is one in-process inventory service with its own database,
// topics and broker.
type instance struct {
	*servicetest.Service
	probes int
}

func startService(t *testing.T) *instance {
	t.Helper()
	return &instance{Service: servicetest.Start(t, run, nil)}
}

func (s *instance) setStock(sku string, available int) {
	s.T().Helper()
	if code, _ := s.Do(http.MethodPut, "/inventory/"+sku, fmt.Sprintf(`{"available":%d}`, available)); code != http.StatusOK {
		s.T().Fatalf("PUT /inventory/%s: %d", sku, code)
	}
}

func (s *instance) stock(sku string) ports.StockResponse {
	s.T().Helper()
	var out ports.StockResponse
	s.GetJSON("/inventory/"+sku, &out)
	return out
}

func (s *instance) status(orderID string) string {
	s.T().Helper()
	var out ports.OrderResponse
	s.GetJSON("/inventory/orders/"+orderID, &out)
	return out.Status
}

func (s *instance) movements(orderID string) []string {
	s.T().Helper()
	var out ports.MovementsResponse
	s.GetJSON("/inventory/orders/"+orderID+"/movements", &out)
	moves := make([]string, len(out.Movements))
	for i, m := range out.Movements {
		moves[i] = fmt.Sprintf("%s %s %d", m.Kind, m.SKU, m.Delta)
	}
	return moves
}

// barrier returns once every message published before it with key has
// been handled: the consumer handles a partition in order, so when a probe
// order sent with the same key shows its effect, everything before it did.
func (s *instance) barrier(key string) {
	s.T().Helper()
	s.probes++
	probe := fmt.Sprintf("probe-%s-%d", key, s.probes)
	// An unknown SKU makes the probe a quick business rejection.
	s.PublishKeyed(key, newEvent(s.T(), event.OrderPaid, probe, 3, paidData(item("NO-SUCH-SKU", 1))))
	s.WaitFor("probe "+probe, func() bool { return s.status(probe) == "REJECTED" })
}

func newEvent(t testing.TB, typ event.Type, orderID string, version int64, data any) event.Envelope {
	t.Helper()
	env, err := event.New(typ, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "order-service"}, data)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func item(sku string, qty int) event.Item { return event.Item{SKU: sku, Quantity: qty} }

func amount(s string) event.Money {
	m, err := event.ParseMoney(s)
	if err != nil {
		panic(err) // only literal amounts are passed
	}
	return m
}

func paidData(items ...event.Item) event.OrderPaidData {
	return event.OrderPaidData{PaymentID: "P-1", PaidAmount: amount("80.00"), Currency: "CNY", CustomerID: "C-1", Items: items}
}

func refundedData(items ...event.Item) event.OrderRefundedData {
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount("80.00"),
		TotalRefundedAmount: amount("80.00"), Currency: "CNY", CustomerID: "C-1", Items: items, TotalReturnedItems: items}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestService(t *testing.T) {
	s := startService(t)

	t.Run("the same OrderPaid twice deducts once", func(t *testing.T) {
		s.Bind(t)
		s.setStock("DUP-1", 10)
		env := newEvent(t, event.OrderPaid, "O-dup", 3, paidData(item("DUP-1", 2)))
		s.Publish(env)
		s.Publish(env)
		s.barrier("O-dup")

		if got := s.status("O-dup"); got != "DEDUCTED" {
			t.Fatalf("status = %s, want DEDUCTED", got)
		}
		if st := s.stock("DUP-1"); st.Available != 8 || st.Deducted != 2 {
			t.Fatalf("stock = %+v, want 8 available, 2 deducted", st)
		}
		if got, want := s.movements("O-dup"), []string{"DEDUCT DUP-1 -2"}; !equal(got, want) {
			t.Fatalf("movements = %v, want %v", got, want)
		}
		if n := s.ProcessedCount(env.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		// The reconciliation view reads the consumer's own version guard.
		code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-dup"]}`)
		if code != http.StatusOK || !strings.Contains(string(raw), `"status":"DEDUCTED"`) ||
			!strings.Contains(string(raw), `"consumer":{"version":3,"state":"DEDUCTED"},"deadLetters":[]`) {
			t.Fatalf("reconciliation view: %d %s", code, raw)
		}
	})

	t.Run("OrderRefunded before OrderPaid applies both in order", func(t *testing.T) {
		s.Bind(t)
		s.setStock("RE-1", 5)
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedData(item("RE-1", 3)))
		pay := newEvent(t, event.OrderPaid, "O-reorder", 3, paidData(item("RE-1", 3)))
		s.Publish(refund)
		s.Publish(pay)
		s.WaitFor("order restocked", func() bool { return s.status("O-reorder") == "RESTOCKED" })

		if got, want := s.movements("O-reorder"), []string{"DEDUCT RE-1 -3", "RESTOCK RE-1 3"}; !equal(got, want) {
			t.Fatalf("movements = %v, want %v", got, want)
		}
		if st := s.stock("RE-1"); st.Available != 5 || st.Deducted != 0 {
			t.Fatalf("stock = %+v, want 5 available, 0 deducted", st)
		}
		if s.ProcessedCount(refund.EventID) != 1 || s.ProcessedCount(pay.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a late OrderCreated is ignored", func(t *testing.T) {
		s.Bind(t)
		s.setStock("LATE-1", 5)
		s.Publish(newEvent(t, event.OrderPaid, "O-late", 3, paidData(item("LATE-1", 1))))
		created := newEvent(t, event.OrderCreated, "O-late", 1, event.OrderCreatedData{
			CustomerID: "C-1", Currency: "CNY", Amount: amount("80.00"),
			Items: []event.PricedItem{{SKU: "LATE-1", Quantity: 1, UnitPrice: amount("80.00")}},
		})
		s.Publish(created)
		s.barrier("O-late")

		if got := s.status("O-late"); got != "DEDUCTED" {
			t.Fatalf("status = %s, want DEDUCTED", got)
		}
		if st := s.stock("LATE-1"); st.Available != 4 {
			t.Fatalf("stock = %+v, want 4 available", st)
		}
		if got := s.movements("O-late"); len(got) != 1 {
			t.Fatalf("movements = %v, want one", got)
		}
	})

	t.Run("invalid JSON is dead-lettered once and the next message is processed", func(t *testing.T) {
		s.Bind(t)
		s.setStock("BAD-1", 5)
		s.PublishRaw("O-bad", []byte(`{"eventId": "E-broken", not json`))
		s.Publish(newEvent(t, event.OrderPaid, "O-bad", 3, paidData(item("BAD-1", 1))))
		s.WaitFor("the next message applied", func() bool { return s.status("O-bad") == "DEDUCTED" })

		dl := s.DeadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("dead letters = %d, want 1", dl.Count)
		}
		if rec := dl.Items[0]; rec.ErrorClass != "PERMANENT" || rec.Consumer != "inventory-service" || rec.OriginalTopic != s.Topic {
			t.Fatalf("dead letter = %+v, want PERMANENT from inventory-service on %s", rec, s.Topic)
		}
	})

	t.Run("insufficient stock rejects the order without retry or DLQ", func(t *testing.T) {
		s.Bind(t)
		s.setStock("SHORT-1", 1)
		s.setStock("SHORT-2", 5)
		s.Publish(newEvent(t, event.OrderPaid, "O-short", 3, paidData(item("SHORT-2", 1), item("SHORT-1", 2))))
		s.WaitFor("order rejected", func() bool { return s.status("O-short") == "REJECTED" })

		if a, b := s.stock("SHORT-1"), s.stock("SHORT-2"); a.Available != 1 || b.Available != 5 || a.Deducted+b.Deducted != 0 {
			t.Fatalf("stock changed: %+v %+v", a, b)
		}
		if got := s.movements("O-short"); len(got) != 0 {
			t.Fatalf("movements = %v, want none", got)
		}
		if n := s.DeadLetters("O-short").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a retryable failure is retried until it succeeds", func(t *testing.T) {
		s.Bind(t)
		s.setStock("RETRY-1", 5)
		failures := s.Counter("consumer_messages_total", `outcome="error"`)
		s.SetFailPoint("inventory.apply", "error", 2)
		s.Publish(newEvent(t, event.OrderPaid, "O-retry", 3, paidData(item("RETRY-1", 2))))
		s.WaitFor("order deducted", func() bool { return s.status("O-retry") == "DEDUCTED" })

		if st := s.stock("RETRY-1"); st.Available != 3 {
			t.Fatalf("stock = %+v, want 3 available", st)
		}
		if got := s.Counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if p := s.FailPoint("inventory.apply"); p.Hits != 2 || p.Remaining != 0 {
			t.Fatalf("fail point = %+v, want 2 hits, spent", p)
		}
		if n := s.DeadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a failure past the retry bound is dead-lettered as retryable", func(t *testing.T) {
		s.Bind(t)
		s.setStock("EXHAUST-1", 5)
		s.SetFailPoint("inventory.apply", "error", 5)
		s.Publish(newEvent(t, event.OrderPaid, "O-exhaust", 3, paidData(item("EXHAUST-1", 2))))
		s.WaitFor("dead letter", func() bool { return s.DeadLetters("O-exhaust").Count == 1 })

		rec := s.DeadLetters("O-exhaust").Items[0]
		if rec.ErrorClass != "RETRYABLE" || rec.Attempts != 5 {
			t.Fatalf("dead letter = %s after %d attempts, want RETRYABLE after 5", rec.ErrorClass, rec.Attempts)
		}
		if p := s.FailPoint("inventory.apply"); p.Hits != 5 {
			t.Fatalf("fail point = %+v, want 5 hits, one per attempt", p)
		}
		if got := s.status("O-exhaust"); got != "NONE" {
			t.Fatalf("status = %s, want NONE", got)
		}
		if st := s.stock("EXHAUST-1"); st.Available != 5 {
			t.Fatalf("stock = %+v, want untouched", st)
		}
	})

	t.Run("a dead letter replayed after the fix is applied exactly once", func(t *testing.T) {
		s.Bind(t)
		s.setStock("REPLAY-1", 5)
		// More failures than RETRY_MAX_ATTEMPTS (5): dead-lettered after the
		// bound, with one failure to spare for the fix to disarm.
		s.SetFailPoint("inventory.apply", "error", 6)
		paid := newEvent(t, event.OrderPaid, "O-replay", 3, paidData(item("REPLAY-1", 2)))
		s.Publish(paid)
		s.WaitFor("dead letter", func() bool { return s.DeadLetters("O-replay").Count == 1 })
		s.SetFailPoint("inventory.apply", "off", 0)
		if p := s.FailPoint("inventory.apply"); p.Hits != 5 {
			t.Fatalf("fail point = %+v, want 5 hits, one per attempt", p)
		}
		dead := s.DeadLetters("O-replay").Items[0]
		if dead.EventID != paid.EventID || dead.ErrorClass != "RETRYABLE" || dead.Attempts != 5 {
			t.Fatalf("dead letter = %s %s after %d attempts, want %s RETRYABLE after 5",
				dead.EventID, dead.ErrorClass, dead.Attempts, paid.EventID)
		}
		if st := s.stock("REPLAY-1"); st.Available != 5 || st.Deducted != 0 {
			t.Fatalf("stock = %+v before the replay, want untouched", st)
		}

		if res := s.Replay(dead.ID); res.Outcome != "APPLIED" || res.EventID != paid.EventID || res.OriginalTopic != s.Topic {
			t.Fatalf("replay = %+v, want APPLIED of %s to %s", res, paid.EventID, s.Topic)
		}
		s.WaitFor("order deducted after the replay", func() bool { return s.status("O-replay") == "DEDUCTED" })
		s.barrier("O-replay")
		check := func() {
			t.Helper()
			if st := s.stock("REPLAY-1"); st.Available != 3 || st.Deducted != 2 {
				t.Fatalf("stock = %+v, want 3 available, 2 deducted", st)
			}
			if got, want := s.movements("O-replay"), []string{"DEDUCT REPLAY-1 -2"}; !equal(got, want) {
				t.Fatalf("movements = %v, want %v", got, want)
			}
			if n := s.ProcessedCount(paid.EventID); n != 1 {
				t.Fatalf("processed-events count = %d, want 1", n)
			}
			if dl := s.DeadLetters("O-replay"); dl.Count != 1 || dl.Items[0].Status != "REPLAYED" {
				t.Fatalf("dead letters = %+v, want the one, REPLAYED", dl)
			}
		}
		check()

		if res := s.Replay(dead.ID); res.Outcome != "ALREADY_REPLAYED" {
			t.Fatalf("second replay = %+v, want ALREADY_REPLAYED", res)
		}
		s.barrier("O-replay")
		check()
	})

	t.Run("a replayed dead letter the order has moved past answers IGNORED_STALE", func(t *testing.T) {
		s.Bind(t)
		s.setStock("STALE-1", 5)
		s.SetFailPoint("inventory.apply", "error", 5)
		paid := newEvent(t, event.OrderPaid, "O-stale", 3, paidData(item("STALE-1", 2)))
		s.Publish(paid)
		s.WaitFor("dead letter", func() bool { return s.DeadLetters("O-stale").Count == 1 })
		s.SetFailPoint("inventory.apply", "off", 0)
		s.FailPointFired("inventory.apply", 5)
		// Meanwhile the order's version 3 arrives under another event id
		// and is applied: the dead letter is stale now.
		s.Publish(newEvent(t, event.OrderPaid, "O-stale", 3, paidData(item("STALE-1", 2))))
		s.WaitFor("the order deducted", func() bool { return s.status("O-stale") == "DEDUCTED" })

		dead := s.DeadLetters("O-stale").Items[0]
		if res := s.Replay(dead.ID); res.Outcome != "IGNORED_STALE" || res.EventID != paid.EventID {
			t.Fatalf("replay = %+v, want IGNORED_STALE of %s", res, paid.EventID)
		}
		if st := s.stock("STALE-1"); st.Available != 3 || st.Deducted != 2 {
			t.Fatalf("stock = %+v, want 3 available, 2 deducted: the stale replay changes nothing", st)
		}
		if res := s.Replay(dead.ID); res.Outcome != "ALREADY_REPLAYED" {
			t.Fatalf("second replay = %+v, want ALREADY_REPLAYED", res)
		}
	})
}

func TestHTTPValidation(t *testing.T) {
	s := startService(t)
	s.setStock("SKU-1", 7)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		want   int
	}{
		{"known SKU", http.MethodGet, "/inventory/SKU-1", "", http.StatusOK},
		{"unknown SKU", http.MethodGet, "/inventory/NOPE", "", http.StatusNotFound},
		{"zero stock", http.MethodPut, "/inventory/SKU-2", `{"available":0}`, http.StatusOK},
		{"negative stock", http.MethodPut, "/inventory/SKU-1", `{"available":-1}`, http.StatusBadRequest},
		{"fractional stock", http.MethodPut, "/inventory/SKU-1", `{"available":1.5}`, http.StatusBadRequest},
		{"string stock", http.MethodPut, "/inventory/SKU-1", `{"available":"5"}`, http.StatusBadRequest},
		{"stock beyond the range", http.MethodPut, "/inventory/SKU-1", `{"available":2147483648}`, http.StatusBadRequest},
		{"missing field", http.MethodPut, "/inventory/SKU-1", `{}`, http.StatusBadRequest},
		{"empty body", http.MethodPut, "/inventory/SKU-1", ``, http.StatusBadRequest},
		{"malformed JSON", http.MethodPut, "/inventory/SKU-1", `{"available":`, http.StatusBadRequest},
		{"oversize body", http.MethodPut, "/inventory/SKU-1", `{"pad":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge},
		{"unknown order is NONE", http.MethodGet, "/inventory/orders/O-unknown", "", http.StatusOK},
		{"movements of unknown order", http.MethodGet, "/inventory/orders/O-unknown/movements", "", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Bind(t)
			if got, _ := s.Do(tt.method, tt.path, tt.body); got != tt.want {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, got, tt.want)
			}
		})
	}
	s.Bind(t)
	if st := s.stock("SKU-1"); st.Available != 7 {
		t.Fatalf("rejected requests changed stock: %+v", st)
	}
	if got := s.status("O-unknown"); got != "NONE" {
		t.Fatalf("unknown order status = %s, want NONE", got)
	}
}

// TestStartsWhileBrokerIsDown starts the service before its broker: HTTP
// serves at once, and the consumer connects when the broker comes up.
func TestStartsWhileBrokerIsDown(t *testing.T) {
	s := &instance{Service: servicetest.StartWithoutBroker(t, run, nil)}
	s.WaitFor("a reconnect warning", func() bool { return strings.Contains(s.Logs(), consumer.ReconnectWarning) })
	if code, _ := s.Do(http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz = %d while the broker is down, want 200", code)
	}
	s.setStock("LATE-BROKER", 3)

	s.StartBroker()
	s.Publish(newEvent(t, event.OrderPaid, "O-late-broker", 3, paidData(item("LATE-BROKER", 1))))
	s.WaitFor("order deducted after the broker came up", func() bool { return s.status("O-late-broker") == "DEDUCTED" })
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
