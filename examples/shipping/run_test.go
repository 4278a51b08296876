package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/app"
	"github.com/reliable-orders/fulfillment/examples/shipping/internal/ports"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// These tests run the real service in-process on an embedded broker and
// read it only through its HTTP API, as an operator would. What the kit
// promises every consumer (deduplication, order, parking, the DLQ, retry,
// replay) is proven by its conformance suite; the tests below are the
// shipping rules' own.

// adapter is how the conformance suite reads what the
// service did for an order: the order's shipment.
type adapter struct{}

func (adapter) Effect(s *servicetest.Service, o consumertest.Order) string { return summary(s, o.ID) }

func (adapter) Want(o consumertest.Order, stage consumertest.Stage) string {
	switch stage {
	case consumertest.Paid:
		return fmt.Sprintf("TO_SHIP [{%s %d}] after [OrderPaid]", o.SKU, consumertest.Units)
	case consumertest.Refunded:
		return "CANCELLED [] after [OrderPaid OrderRefunded]"
	}
	return "NONE"
}

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Features{Consumer: "shipping-service", FailPoint: app.FailPoint, App: "internal/app"}, run, adapter{})
}

// shipment returns the order's shipment; ok is false while it has none.
func shipment(s *servicetest.Service, orderID string) (out ports.ShipmentResponse, ok bool) {
	s.T().Helper()
	code, raw := s.Do(http.MethodGet, "/shipments/"+orderID, "")
	switch code {
	case http.StatusNotFound:
		return out, false
	case http.StatusOK:
	default:
		s.T().Fatalf("GET /shipments/%s: %d %s", orderID, code, raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		s.T().Fatalf("GET /shipments/%s: decode: %v", orderID, err)
	}
	return out, true
}

// summary is the shipment as "STATUS [items] after [event types]", or
// "NONE" while the order has none: one string to compare and to print.
func summary(s *servicetest.Service, orderID string) string {
	s.T().Helper()
	sh, ok := shipment(s, orderID)
	if !ok {
		return "NONE"
	}
	types := make([]string, len(sh.History))
	for i, c := range sh.History {
		types[i] = c.EventType
	}
	return fmt.Sprintf("%s %v after %v", sh.Status, sh.Items, types)
}

// expectSummary fails the test unless, once every message sent so far was
// consumed, the order's summary is want.
func expectSummary(s *servicetest.Service, orderID, want string) {
	s.T().Helper()
	s.Drained("shipping-service")
	if got := summary(s, orderID); got != want {
		s.T().Fatalf("shipment of %s: %s, want %s", orderID, got, want)
	}
}

func TestService(t *testing.T) {
	s := servicetest.Start(t, run, nil)

	t.Run("a partial refund (v2) leaves the rest TO_SHIP", func(t *testing.T) {
		s.Bind(t)
		oneA := consumertest.Items(consumertest.Item("A", 1))
		s.Publish(
			consumertest.OrderPaid(t, "O-partial", "80.00", consumertest.Item("A", 2), consumertest.Item("B", 1)),
			consumertest.OrderRefunded(t, "O-partial", 5, "10.00", "10.00", oneA, oneA),
			// The second refund returns the other A: the running total
			// (A 2) is what says both are back.
			consumertest.OrderRefunded(t, "O-partial", 7, "10.00", "10.00", oneA, consumertest.Items(consumertest.Item("A", 2))),
		)
		expectSummary(s, "O-partial", "TO_SHIP [{B 1}] after [OrderPaid OrderRefunded OrderRefunded]")
		if sh, _ := shipment(s, "O-partial"); fmt.Sprint(sh.Ordered) != "[{A 2} {B 1}]" {
			t.Fatalf("ordered = %v, want what was paid for", sh.Ordered)
		}
	})

	t.Run("a full refund (v1) cancels and a later refund still applies in order", func(t *testing.T) {
		s.Bind(t)
		s.Publish(
			consumertest.OrderPaid(t, "O-full", "80.00", consumertest.Item("A", 1), consumertest.Item("B", 2)),
			consumertest.OrderRefundedV1(t, "O-full", "80.00", consumertest.Item("A", 1), consumertest.Item("B", 2)),
		)
		expectSummary(s, "O-full", "CANCELLED [] after [OrderPaid OrderRefunded]")
		// A refund of money alone after the cancel: applied, and nothing
		// changes. Were CANCELLED missing from RefundedFrom, it would be
		// parked instead, and dead-lettered at PARK_DEADLINE.
		all := consumertest.Items(consumertest.Item("A", 1), consumertest.Item("B", 2))
		s.Publish(consumertest.OrderRefunded(t, "O-full", 7, "10.00", "10.00", nil, all))
		expectSummary(s, "O-full", "CANCELLED [] after [OrderPaid OrderRefunded OrderRefunded]")
	})

	t.Run("a malformed event is dead-lettered with its reason and can be replayed", func(t *testing.T) {
		s.Bind(t)
		// An OrderPaid with a line of zero units breaks the contract's
		// quantity rule: no retry can fix it. Sent without the relay's
		// headers, as another client might, it is known by its key.
		bad := consumertest.OrderPaid(t, "O-bad", "80.00", consumertest.Item("A", 1))
		bad.Data = json.RawMessage(`{"paymentId":"P-1","paidAmount":"80.00","currency":"CNY","customerId":"C-1","items":[{"sku":"A","quantity":0}]}`)
		raw, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		s.PublishRaw("O-bad", raw)
		s.Drained("shipping-service")
		dl := s.DeadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("%d dead letters, want 1", dl.Count)
		}
		rec := dl.Items[0]
		if rec.ErrorClass != "PERMANENT" || rec.Attempts != 1 || !strings.HasPrefix(rec.FailureReason, "SCHEMA_VIOLATION: ") ||
			rec.Consumer != "shipping-service" || rec.OriginalTopic != s.Topic || rec.AggregateID != "O-bad" || string(rec.Value) != string(raw) {
			t.Fatalf("dead letter = %+v, want PERMANENT SCHEMA_VIOLATION after one attempt, from shipping-service on %s, with the message", rec, s.Topic)
		}
		// The partition goes on: the next event of the order is applied.
		next := consumertest.Event(t, event.OrderPaid, "O-bad", 4, consumertest.PaidData("C-1", "80.00", consumertest.Item("A", 1)))
		s.Publish(next)
		expectSummary(s, "O-bad", "TO_SHIP [{A 1}] after [OrderPaid]")

		// A replay sends the message back as it was and is audited; a
		// malformed one is dead-lettered again, so nothing bypasses the
		// contract. Without an eventId there is no dedup row to watch, so
		// the replay cannot tell what the consumer did: PENDING.
		if res := s.Replay(rec.ID); res.Outcome != "PENDING" || res.OriginalTopic != s.Topic {
			t.Fatalf("replay = %+v, want PENDING to %s", res, s.Topic)
		}
		s.Drained("shipping-service")
		statuses := map[string]int{}
		for _, r := range s.DeadLetters("O-bad").Items {
			statuses[r.Status]++
		}
		if statuses["REPLAYED"] != 1 || statuses["DEAD"] != 1 || len(statuses) != 2 {
			t.Fatalf("dead letter statuses = %v, want the first REPLAYED and its copy DEAD", statuses)
		}
		if res := s.Replay(rec.ID); res.Outcome != "ALREADY_REPLAYED" {
			t.Fatalf("second replay = %+v, want ALREADY_REPLAYED", res)
		}
		expectSummary(s, "O-bad", "TO_SHIP [{A 1}] after [OrderPaid]")
	})

	t.Run("GET /admin/lag answers for the group", func(t *testing.T) {
		s.Bind(t)
		var r lag.Report
		s.WaitFor("the group to catch up", func() bool {
			s.GetJSON("/admin/lag", &r)
			return r.TotalLag == 0 && r.ConsumedPerSecond > 0
		})
		if r.Group != "shipping-service" || r.Topic != s.Topic || len(r.Partitions) != 4 {
			t.Fatalf("report = %+v, want group shipping-service, topic %s, 4 partitions", r, s.Topic)
		}
	})

	t.Run("/metrics exposes the consumer counters", func(t *testing.T) {
		s.Bind(t)
		_, raw := s.Do(http.MethodGet, "/metrics", "")
		for _, want := range []string{
			`consumer_messages_total{consumer="shipping-service",outcome="ok"}`,
			`consumer_messages_total{consumer="shipping-service",outcome="invalid"}`,
			`consumer_event_outcomes_total{consumer="shipping-service",outcome="APPLIED"}`,
			`consumer_event_outcomes_total{consumer="shipping-service",outcome="DUPLICATE"}`,
			`consumer_event_outcomes_total{consumer="shipping-service",outcome="WAITING_FOR_GAP"}`,
			`consumer_retries_total{consumer="shipping-service"}`,
			`consumer_dead_letters_total{consumer="shipping-service",error_class="PERMANENT"}`,
			`consumer_batch_size_count{consumer="shipping-service"}`,
			`consumer_handler_duration_seconds_count{consumer="shipping-service"}`,
			`event_convergence_seconds_count{consumer="shipping-service"}`,
			`consumer_lag_total{group="shipping-service"} 0`,
			`consumer_oldest_unprocessed_age_seconds{group="shipping-service"} 0`,
		} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

func TestHTTPValidation(t *testing.T) {
	s := servicetest.Start(t, run, nil)
	s.Publish(consumertest.OrderPaid(t, "O-known", "80.00", consumertest.Item("A", 1)))
	expectSummary(s, "O-known", "TO_SHIP [{A 1}] after [OrderPaid]")
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantBody string
	}{
		{"known order", "/shipments/O-known", http.StatusOK, `"status":"TO_SHIP"`},
		{"unknown order", "/shipments/O-unknown", http.StatusNotFound, `"businessCode":"SHIPMENT_NOT_FOUND"`},
		{"id with a space", "/shipments/O%20bad", http.StatusBadRequest, `"businessCode":"INVALID_REQUEST"`},
		{"id beyond the length rule", "/shipments/" + strings.Repeat("x", rules.MaxIDLength+1), http.StatusBadRequest, `"businessCode":"INVALID_REQUEST"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Bind(t)
			code, raw := s.Do(http.MethodGet, tt.path, "")
			if code != tt.wantCode || !strings.Contains(string(raw), tt.wantBody) {
				t.Fatalf("GET %s = %d %s, want %d with %s", tt.path, code, raw, tt.wantCode, tt.wantBody)
			}
		})
	}
}
