package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
)

// instance is one in-process points service with its own database, topics
// and broker.
type instance struct {
	*servicetest.Service
	probes int
}

func startService(t *testing.T) *instance {
	t.Helper()
	return &instance{Service: servicetest.Start(t, run, nil)}
}

func (s *instance) ledger(orderID string) ports.OrderResponse {
	s.T().Helper()
	var out ports.OrderResponse
	s.GetJSON("/points/orders/"+orderID, &out)
	return out
}

// entries lists an order's ledger as "TYPE points amount", in order.
func (s *instance) entries(orderID string) []string {
	s.T().Helper()
	out := s.ledger(orderID)
	entries := make([]string, len(out.Entries))
	for i, e := range out.Entries {
		entries[i] = fmt.Sprintf("%s %d %s", e.Type, e.Points, e.Amount)
	}
	return entries
}

func (s *instance) balance(customerID string) int64 {
	s.T().Helper()
	var out ports.BalanceResponse
	s.GetJSON("/points/customers/"+customerID, &out)
	return out.Balance
}

// barrier returns once every message published before it with key has
// been handled: the consumer handles a partition in order, so when a probe
// order sent with the same key shows its effect, everything before it did.
func (s *instance) barrier(key string) {
	s.T().Helper()
	s.probes++
	probe := fmt.Sprintf("probe-%s-%d", key, s.probes)
	s.PublishKeyed(key, newEvent(s.T(), event.OrderPaid, probe, 3, paidData("1.00")))
	s.WaitFor("probe "+probe, func() bool { return s.ledger(probe).Count == 1 })
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

func paidData(paid string) event.OrderPaidData {
	return event.OrderPaidData{PaymentID: "P-1", PaidAmount: amount(paid), Currency: "CNY", CustomerID: "C-1", Items: items()}
}

func paidBy(customer, paid string) event.OrderPaidData {
	d := paidData(paid)
	d.CustomerID = customer
	return d
}

func refundedData(customer, refunded string) event.OrderRefundedData {
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount(refunded),
		TotalRefundedAmount: amount(refunded), Currency: "CNY", CustomerID: customer, Items: items(), TotalReturnedItems: items()}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestService(t *testing.T) {
	s := startService(t)

	t.Run("the same OrderPaid twice earns 80 points once", func(t *testing.T) {
		s.Bind(t)
		env := newEvent(t, event.OrderPaid, "O-dup", 3, paidBy("C-dup", "80.00"))
		s.Publish(env)
		s.Publish(env)
		s.barrier("O-dup")

		if got, want := s.entries("O-dup"), []string{"EARN 80 80.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if got := s.ledger("O-dup").Status; got != "EARNED" {
			t.Fatalf("status = %s, want EARNED", got)
		}
		if n := s.ProcessedCount(env.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		if b := s.balance("C-dup"); b != 80 {
			t.Fatalf("customer balance = %d, want 80", b)
		}
		// The reconciliation view reads the consumer's own version guard.
		code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-dup"]}`)
		if code != http.StatusOK || !strings.Contains(string(raw), `"points":80`) ||
			!strings.Contains(string(raw), `"consumer":{"version":3,"state":"EARNED"},"deadLetters":[]`) {
			t.Fatalf("reconciliation view: %d %s", code, raw)
		}
	})

	t.Run("OrderRefunded before OrderPaid applies both in order", func(t *testing.T) {
		s.Bind(t)
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedData("C-reorder", "30.50"))
		pay := newEvent(t, event.OrderPaid, "O-reorder", 3, paidBy("C-reorder", "80.00"))
		s.Publish(refund)
		s.Publish(pay)
		s.WaitFor("points reversed", func() bool { return s.ledger("O-reorder").Status == "PARTIALLY_REVERSED" })

		// 80.00 − 30.50 leaves 49.50 paid: worth 49 points.
		if got, want := s.entries("O-reorder"), []string{"EARN 80 80.00", "REVERSAL -31 30.50"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if b := s.balance("C-reorder"); b != 49 {
			t.Fatalf("customer balance = %d, want 49", b)
		}
		if s.ProcessedCount(refund.EventID) != 1 || s.ProcessedCount(pay.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a late OrderCreated is ignored", func(t *testing.T) {
		s.Bind(t)
		s.Publish(newEvent(t, event.OrderPaid, "O-late", 3, paidData("12.00")))
		s.Publish(newEvent(t, event.OrderCreated, "O-late", 1, event.OrderCreatedData{
			CustomerID: "C-1", Currency: "CNY", Amount: amount("12.00"),
			Items: []event.PricedItem{{SKU: "SKU-1", Quantity: 1, UnitPrice: amount("12.00")}},
		}))
		s.barrier("O-late")

		if got, want := s.entries("O-late"), []string{"EARN 12 12.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
	})

	t.Run("invalid JSON is dead-lettered once and the next message is processed", func(t *testing.T) {
		s.Bind(t)
		s.PublishRaw("O-bad", []byte(`{"eventId": "E-broken", not json`))
		s.Publish(newEvent(t, event.OrderPaid, "O-bad", 3, paidData("5.00")))
		s.WaitFor("the next message applied", func() bool { return s.ledger("O-bad").Count == 1 })

		dl := s.DeadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("dead letters = %d, want 1", dl.Count)
		}
		if rec := dl.Items[0]; rec.ErrorClass != "PERMANENT" || rec.Consumer != "points-service" || rec.OriginalTopic != s.Topic {
			t.Fatalf("dead letter = %+v, want PERMANENT from points-service on %s", rec, s.Topic)
		}
	})

	t.Run("a refund of more than was paid reverses what was earned, no more, without retry or DLQ", func(t *testing.T) {
		s.Bind(t)
		s.Publish(newEvent(t, event.OrderPaid, "O-neg", 3, paidBy("C-neg", "10.00")))
		s.Publish(newEvent(t, event.OrderRefunded, "O-neg", 5, refundedData("C-neg", "20.00")))
		s.WaitFor("points reversed", func() bool { return s.ledger("O-neg").Status == "REVERSED" })

		if got, want := s.entries("O-neg"), []string{"EARN 10 10.00", "REVERSAL -10 20.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if b := s.balance("C-neg"); b != 0 {
			t.Fatalf("customer balance = %d, want 0", b)
		}
		if n := s.DeadLetters("O-neg").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a retryable failure is retried until it succeeds", func(t *testing.T) {
		s.Bind(t)
		failures := s.Counter("consumer_messages_total", `outcome="error"`)
		s.SetFailPoint("points.apply", "error", 2)
		s.Publish(newEvent(t, event.OrderPaid, "O-retry", 3, paidData("7.00")))
		s.WaitFor("points earned", func() bool { return s.ledger("O-retry").Count == 1 })

		if got := s.Counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if p := s.FailPoint("points.apply"); p.Hits != 2 || p.Remaining != 0 {
			t.Fatalf("fail point = %+v, want 2 hits, spent", p)
		}
		if n := s.DeadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("an unknown order and customer read as empty", func(t *testing.T) {
		s.Bind(t)
		if out := s.ledger("O-unknown"); out.Status != "NONE" || out.Count != 0 || out.Entries == nil {
			t.Fatalf("unknown order = %+v, want NONE with an empty list", out)
		}
		if b := s.balance("C-unknown"); b != 0 {
			t.Fatalf("unknown customer balance = %d, want 0", b)
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
	s.Publish(newEvent(t, event.OrderPaid, "O-late-broker", 3, paidData("3.00")))
	s.WaitFor("points earned after the broker came up", func() bool { return s.ledger("O-late-broker").Count == 1 })
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
