package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/notification/internal/ports"
)

// instance is one in-process notification service with its own database, topics
// and broker.
type instance struct {
	*servicetest.Service
	probes int
}

func startService(t *testing.T) *instance {
	t.Helper()
	return &instance{Service: servicetest.Start(t, run, nil)}
}

func (s *instance) list(orderID string) ports.ListResponse {
	s.T().Helper()
	var out ports.ListResponse
	s.GetJSON("/notifications?orderId="+orderID, &out)
	return out
}

// kinds lists an order's notifications by kind, in order.
func (s *instance) kinds(orderID string) []string {
	s.T().Helper()
	out := s.list(orderID)
	kinds := make([]string, len(out.Items))
	for i, it := range out.Items {
		kinds[i] = it.Kind
	}
	return kinds
}

// barrier returns once every message published before it with key has
// been handled: the consumer handles a partition in order, so when a probe
// order sent with the same key shows its effect, everything before it did.
func (s *instance) barrier(key string) {
	s.T().Helper()
	s.probes++
	probe := fmt.Sprintf("probe-%s-%d", key, s.probes)
	s.PublishKeyed(key, newEvent(s.T(), event.OrderPaid, probe, 3, paidData()))
	s.WaitFor("probe "+probe, func() bool { return s.list(probe).Count == 1 })
}

func newEvent(t testing.TB, typ event.Type, orderID string, version int64, data any) event.Envelope {
	t.Helper()
	env, err := event.New(typ, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "order-service"}, data)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func amount(s string) event.Money {
	m, err := event.ParseMoney(s)
	if err != nil {
		panic(err) // only literal amounts are passed
	}
	return m
}

func items() []event.Item { return []event.Item{{SKU: "SKU-1", Quantity: 2}} }

func paidData() event.OrderPaidData {
	return event.OrderPaidData{PaymentID: "P-1", PaidAmount: amount("80.00"), Currency: "CNY", CustomerID: "C-1", Items: items()}
}

func refundedData() event.OrderRefundedData {
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount("80.00"),
		TotalRefundedAmount: amount("80.00"), Currency: "CNY", CustomerID: "C-1", Items: items(), TotalReturnedItems: items()}
}

func refundRejectedData() event.OrderRefundRejectedData {
	return event.OrderRefundRejectedData{RefundID: "R-0", Amount: amount("500.00"), Currency: "CNY", CustomerID: "C-1",
		Reason: "REFUND_EXCEEDS_PAYMENT"}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestService(t *testing.T) {
	s := startService(t)

	t.Run("the same OrderPaid twice notifies once", func(t *testing.T) {
		s.Bind(t)
		env := newEvent(t, event.OrderPaid, "O-dup", 3, paidData())
		s.Publish(env)
		s.Publish(env)
		s.barrier("O-dup")

		out := s.list("O-dup")
		if out.Count != 1 || len(out.Items) != 1 {
			t.Fatalf("notifications = %+v, want one", out)
		}
		if it := out.Items[0]; it.EventID != env.EventID || it.Kind != "ORDER_PAID" || it.Channel != "IN_APP" ||
			!strings.Contains(it.Body, "80.00 CNY") || it.CreatedAt.IsZero() {
			t.Fatalf("notification = %+v", it)
		}
		if n := s.ProcessedCount(env.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		// The reconciliation view reads the consumer's own version guard.
		code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-dup"]}`)
		if code != http.StatusOK || !strings.Contains(string(raw), `"kind":"ORDER_PAID"`) ||
			!strings.Contains(string(raw), `"consumer":{"version":3,"state":"PAID_NOTIFIED"},"deadLetters":[]`) {
			t.Fatalf("reconciliation view: %d %s", code, raw)
		}
	})

	t.Run("OrderRefunded before OrderPaid notifies both in order", func(t *testing.T) {
		s.Bind(t)
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedData())
		pay := newEvent(t, event.OrderPaid, "O-reorder", 3, paidData())
		s.Publish(refund)
		s.Publish(pay)
		s.WaitFor("two notifications", func() bool { return s.list("O-reorder").Count == 2 })

		if got, want := s.kinds("O-reorder"), []string{"ORDER_PAID", "ORDER_REFUNDED"}; !equal(got, want) {
			t.Fatalf("notifications = %v, want %v", got, want)
		}
		if s.ProcessedCount(refund.EventID) != 1 || s.ProcessedCount(pay.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a declined refund is told and a later refund still is", func(t *testing.T) {
		s.Bind(t)
		s.Publish(newEvent(t, event.OrderPaid, "O-declined", 3, paidData()))
		s.Publish(newEvent(t, event.OrderRefundRejected, "O-declined", 5, refundRejectedData()))
		s.Publish(newEvent(t, event.OrderRefunded, "O-declined", 7, refundedData()))
		s.WaitFor("three notifications", func() bool { return s.list("O-declined").Count == 3 })

		if got, want := s.kinds("O-declined"), []string{"ORDER_PAID", "REFUND_REJECTED", "ORDER_REFUNDED"}; !equal(got, want) {
			t.Fatalf("notifications = %v, want %v", got, want)
		}
	})

	t.Run("a late OrderCreated is ignored", func(t *testing.T) {
		s.Bind(t)
		s.Publish(newEvent(t, event.OrderPaid, "O-late", 3, paidData()))
		s.Publish(newEvent(t, event.OrderCreated, "O-late", 1, event.OrderCreatedData{
			CustomerID: "C-1", Currency: "CNY", Amount: amount("80.00"),
			Items: []event.PricedItem{{SKU: "SKU-1", Quantity: 1, UnitPrice: amount("80.00")}},
		}))
		s.barrier("O-late")

		if got, want := s.kinds("O-late"), []string{"ORDER_PAID"}; !equal(got, want) {
			t.Fatalf("notifications = %v, want %v", got, want)
		}
	})

	t.Run("invalid JSON is dead-lettered once and the next message is processed", func(t *testing.T) {
		s.Bind(t)
		s.PublishRaw("O-bad", []byte(`{"eventId": "E-broken", not json`))
		s.Publish(newEvent(t, event.OrderPaid, "O-bad", 3, paidData()))
		s.WaitFor("the next message applied", func() bool { return s.list("O-bad").Count == 1 })

		dl := s.DeadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("dead letters = %d, want 1", dl.Count)
		}
		if rec := dl.Items[0]; rec.ErrorClass != "PERMANENT" || rec.Consumer != "notification-service" || rec.OriginalTopic != s.Topic {
			t.Fatalf("dead letter = %+v, want PERMANENT from notification-service on %s", rec, s.Topic)
		}
	})

	t.Run("a retryable failure is retried until it succeeds", func(t *testing.T) {
		s.Bind(t)
		failures := s.Counter("consumer_messages_total", `outcome="error"`)
		s.SetFailPoint("notification.apply", "error", 2)
		s.Publish(newEvent(t, event.OrderPaid, "O-retry", 3, paidData()))
		s.WaitFor("notification sent", func() bool { return s.list("O-retry").Count == 1 })

		if got := s.Counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if p := s.FailPoint("notification.apply"); p.Hits != 2 || p.Remaining != 0 {
			t.Fatalf("fail point = %+v, want 2 hits, spent", p)
		}
		if n := s.DeadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("orderId is required", func(t *testing.T) {
		s.Bind(t)
		if code, _ := s.Do(http.MethodGet, "/notifications", ""); code != http.StatusBadRequest {
			t.Fatalf("GET /notifications = %d, want 400", code)
		}
		if out := s.list("O-unknown"); out.Count != 0 || out.Items == nil {
			t.Fatalf("unknown order = %+v, want an empty list", out)
		}
	})
}

// TestStartsWhileBrokerIsDown starts the service before its broker: HTTP
// serves at once, and the consumer connects when the broker comes up.
func TestStartsWhileBrokerIsDown(t *testing.T) {
	s := &instance{Service: servicetest.StartWithoutBroker(t, run, nil)}
	s.WaitFor("a reconnect warning", func() bool { return strings.Contains(s.Logs(), consumer.ReconnectWarning) })
	if code, _ := s.Do(http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz = %d while the broker is down, want 200", code)
	}

	s.StartBroker()
	s.Publish(newEvent(t, event.OrderPaid, "O-late-broker", 3, paidData()))
	s.WaitFor("notification after the broker came up", func() bool { return s.list("O-late-broker").Count == 1 })
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
