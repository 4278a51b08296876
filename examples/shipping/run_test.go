package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/ports"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// These tests run the real service in-process on an embedded broker and
// read it only through its HTTP API, as an operator would. What they prove
// comes from pkg/service's kit; the shipping code only decides shipments.

// instance is one in-process shipping service with its own database,
// topics and broker.
type instance struct {
	*servicetest.Service
	probes int
}

func startService(t *testing.T, env map[string]string) *instance {
	t.Helper()
	return &instance{Service: servicetest.Start(t, run, env)}
}

// shipment returns the order's shipment; ok is false while it has none.
func (s *instance) shipment(orderID string) (out ports.ShipmentResponse, ok bool) {
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
func (s *instance) summary(orderID string) string {
	s.T().Helper()
	sh, ok := s.shipment(orderID)
	if !ok {
		return "NONE"
	}
	types := make([]string, len(sh.History))
	for i, c := range sh.History {
		types[i] = c.EventType
	}
	return fmt.Sprintf("%s %v after %v", sh.Status, sh.Items, types)
}

// waitSummary waits until the order's summary is want, and says what it
// was when it never became want.
func (s *instance) waitSummary(orderID, want string) {
	s.T().Helper()
	got := ""
	defer func() {
		if s.T().Failed() {
			s.T().Logf("shipment of %s: %s, want %s", orderID, got, want)
		}
	}()
	s.WaitFor("shipment of "+orderID+": "+want, func() bool { got = s.summary(orderID); return got == want })
}

// barrier returns once every message published before it with key has
// been handled: the consumer handles a partition in order, so when a probe
// order sent with the same key has its shipment, everything before it was
// handled.
func (s *instance) barrier(key string) {
	s.T().Helper()
	s.probes++
	probe := fmt.Sprintf("probe-%s-%d", key, s.probes)
	s.PublishKeyed(key, newEvent(s.T(), event.OrderPaid, probe, 3, paidData(item("PROBE", 1))))
	s.WaitFor("probe "+probe, func() bool { _, ok := s.shipment(probe); return ok })
}

// outcomes is how many events the consumer has handled with outcome
// (APPLIED, DUPLICATE, WAITING_FOR_GAP, ...).
func (s *instance) outcomes(outcome string) float64 {
	s.T().Helper()
	return s.Counter("consumer_event_outcomes_total", `outcome="`+outcome+`"`)
}

func newEvent(t testing.TB, typ event.Type, orderID string, version int64, data any) event.Envelope {
	t.Helper()
	return newEventV(t, typ, orderID, version, 0, data)
}

// newEventV builds an event of eventVersion v (0: the current one).
func newEventV(t testing.TB, typ event.Type, orderID string, version int64, v int, data any) event.Envelope {
	t.Helper()
	env, err := event.New(typ, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "order-service", EventVersion: v}, data)
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

// refundedV2 is one refund of several: returned are the goods it gives
// back, total the goods the order's refunds have given back so far.
func refundedV2(returned, total []event.Item) event.OrderRefundedData {
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount("10.00"),
		TotalRefundedAmount: amount("10.00"), Currency: "CNY", CustomerID: "C-1", Items: returned, TotalReturnedItems: total}
}

// refundedV1 is the refund of the first release: the order's only one,
// which returned every item.
func refundedV1(items ...event.Item) event.OrderRefundedV1Data {
	return event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount("80.00"),
		Currency: "CNY", CustomerID: "C-1", Items: items}
}

// items lists its, as [] (never null) when there are none.
func items(its ...event.Item) []event.Item { return append([]event.Item{}, its...) }

func TestService(t *testing.T) {
	s := startService(t, nil)

	t.Run("the same OrderPaid delivered twice ships once", func(t *testing.T) {
		s.Bind(t)
		duplicates := s.outcomes("DUPLICATE")
		paid := newEvent(t, event.OrderPaid, "O-dup", 3, paidData(item("A", 2)))
		s.Publish(paid)
		s.Publish(paid)
		s.barrier("O-dup")

		if got, want := s.summary("O-dup"), "TO_SHIP [{A 2}] after [OrderPaid]"; got != want {
			t.Fatalf("shipment = %s, want %s", got, want)
		}
		if n := s.ProcessedCount(paid.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		if got := s.outcomes("DUPLICATE") - duplicates; got != 1 {
			t.Fatalf("DUPLICATE outcomes = %v, want 1 (the second delivery)", got)
		}
	})

	t.Run("an OrderRefunded before its OrderPaid is parked and applied after it", func(t *testing.T) {
		s.Bind(t)
		parked := s.outcomes("WAITING_FOR_GAP")
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedV2(items(item("A", 1)), items(item("A", 1))))
		s.Publish(refund)
		s.WaitFor("the refund parked", func() bool { return s.outcomes("WAITING_FOR_GAP")-parked == 1 })
		if got := s.summary("O-reorder"); got != "NONE" {
			t.Fatalf("shipment = %s while its payment is missing, want NONE", got)
		}

		paid := newEvent(t, event.OrderPaid, "O-reorder", 3, paidData(item("A", 2), item("B", 1)))
		s.Publish(paid)
		s.waitSummary("O-reorder", "TO_SHIP [{A 1} {B 1}] after [OrderPaid OrderRefunded]")
		if s.ProcessedCount(refund.EventID) != 1 || s.ProcessedCount(paid.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a partial refund (v2) leaves the rest TO_SHIP", func(t *testing.T) {
		s.Bind(t)
		s.Publish(
			newEvent(t, event.OrderPaid, "O-partial", 3, paidData(item("A", 2), item("B", 1))),
			newEvent(t, event.OrderRefunded, "O-partial", 5, refundedV2(items(item("A", 1)), items(item("A", 1)))),
			// The second refund returns the other A: the running total
			// (A 2) is what says both are back.
			newEvent(t, event.OrderRefunded, "O-partial", 7, refundedV2(items(item("A", 1)), items(item("A", 2)))),
		)
		s.waitSummary("O-partial", "TO_SHIP [{B 1}] after [OrderPaid OrderRefunded OrderRefunded]")
		if sh, _ := s.shipment("O-partial"); fmt.Sprint(sh.Ordered) != "[{A 2} {B 1}]" {
			t.Fatalf("ordered = %v, want what was paid for", sh.Ordered)
		}
	})

	t.Run("a full refund (v1) cancels and a later refund still applies in order", func(t *testing.T) {
		s.Bind(t)
		s.Publish(
			newEvent(t, event.OrderPaid, "O-full", 3, paidData(item("A", 1), item("B", 2))),
			newEventV(t, event.OrderRefunded, "O-full", 5, 1, refundedV1(item("A", 1), item("B", 2))),
		)
		s.waitSummary("O-full", "CANCELLED [] after [OrderPaid OrderRefunded]")
		// A refund of money alone after the cancel: applied, and nothing
		// changes. Were CANCELLED missing from RefundedFrom, it would be
		// parked instead, and dead-lettered at PARK_DEADLINE.
		s.Publish(newEvent(t, event.OrderRefunded, "O-full", 7, refundedV2(items(), items(item("A", 1), item("B", 2)))))
		s.waitSummary("O-full", "CANCELLED [] after [OrderPaid OrderRefunded OrderRefunded]")
	})

	t.Run("a retryable failure is retried until it applies once", func(t *testing.T) {
		s.Bind(t)
		failures := s.Counter("consumer_messages_total", `outcome="error"`)
		retries := s.Counter("consumer_retries_total", `consumer="shipping-service"`)
		s.SetFailPoint("shipping.apply", "error", 2)
		paid := newEvent(t, event.OrderPaid, "O-retry", 3, paidData(item("A", 1)))
		s.Publish(paid)
		s.WaitFor("the shipment", func() bool { _, ok := s.shipment("O-retry"); return ok })

		if got := s.Counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if p := s.FailPoint("shipping.apply"); p.Hits != 2 || p.Remaining != 0 {
			t.Fatalf("fail point = %+v, want 2 hits, spent", p)
		}
		if got := s.Counter("consumer_retries_total", `consumer="shipping-service"`) - retries; got != 2 {
			t.Fatalf("retries = %v, want 2", got)
		}
		if got, want := s.summary("O-retry"), "TO_SHIP [{A 1}] after [OrderPaid]"; got != want {
			t.Fatalf("shipment = %s, want %s", got, want)
		}
		if n := s.ProcessedCount(paid.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		if n := s.DeadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a malformed event is dead-lettered with its reason and can be replayed", func(t *testing.T) {
		s.Bind(t)
		// An OrderPaid with a line of zero units breaks the contract's
		// quantity rule: no retry can fix it. Sent without the relay's
		// headers, as another client might, it is known by its key.
		bad := newEvent(t, event.OrderPaid, "O-bad", 3, paidData(item("A", 1)))
		bad.Data = json.RawMessage(`{"paymentId":"P-1","paidAmount":"80.00","currency":"CNY","customerId":"C-1","items":[{"sku":"A","quantity":0}]}`)
		raw, err := json.Marshal(bad)
		if err != nil {
			t.Fatal(err)
		}
		s.PublishRaw("O-bad", raw)
		s.WaitFor("the dead letter", func() bool { return s.DeadLetters("O-bad").Count == 1 })
		rec := s.DeadLetters("O-bad").Items[0]
		if rec.ErrorClass != "PERMANENT" || rec.Attempts != 1 || !strings.HasPrefix(rec.FailureReason, "SCHEMA_VIOLATION: ") ||
			rec.Consumer != "shipping-service" || rec.OriginalTopic != s.Topic || rec.AggregateID != "O-bad" || string(rec.Value) != string(raw) {
			t.Fatalf("dead letter = %+v, want PERMANENT SCHEMA_VIOLATION after one attempt, from shipping-service on %s, with the message", rec, s.Topic)
		}
		// The partition goes on: the next event of the order is applied.
		s.Publish(newEvent(t, event.OrderPaid, "O-bad", 4, paidData(item("A", 1))))
		s.WaitFor("the next event applied", func() bool { _, ok := s.shipment("O-bad"); return ok })

		// A replay sends the message back as it was and is audited; a
		// malformed one is dead-lettered again, so nothing bypasses the
		// contract. Without an eventId there is no dedup row to watch, so
		// the replay cannot tell what the consumer did: PENDING.
		if res := s.Replay(rec.ID); res.Outcome != "PENDING" || res.OriginalTopic != s.Topic {
			t.Fatalf("replay = %+v, want PENDING to %s", res, s.Topic)
		}
		s.WaitFor("the replayed copy dead-lettered", func() bool { return s.DeadLetters("O-bad").Count == 2 })
		statuses := map[string]int{}
		for _, r := range s.DeadLetters("O-bad").Items {
			statuses[r.Status]++
		}
		if statuses["REPLAYED"] != 1 || statuses["DEAD"] != 1 {
			t.Fatalf("dead letter statuses = %v, want the first REPLAYED and its copy DEAD", statuses)
		}
		if res := s.Replay(rec.ID); res.Outcome != "ALREADY_REPLAYED" {
			t.Fatalf("second replay = %+v, want ALREADY_REPLAYED", res)
		}
		if got, want := s.summary("O-bad"), "TO_SHIP [{A 1}] after [OrderPaid]"; got != want {
			t.Fatalf("shipment = %s, want %s", got, want)
		}
	})

	t.Run("a dead letter replayed after the fix is applied once", func(t *testing.T) {
		s.Bind(t)
		// More failures than RETRY_MAX_ATTEMPTS (5): dead-lettered after
		// the bound, with one to spare for the fix to disarm.
		s.SetFailPoint("shipping.apply", "error", 6)
		paid := newEvent(t, event.OrderPaid, "O-replay", 3, paidData(item("A", 3)))
		s.Publish(paid)
		s.WaitFor("the dead letter", func() bool { return s.DeadLetters("O-replay").Count == 1 })
		s.SetFailPoint("shipping.apply", "off", 0)
		if p := s.FailPoint("shipping.apply"); p.Hits != 5 {
			t.Fatalf("fail point = %+v, want 5 hits, one per attempt", p)
		}
		rec := s.DeadLetters("O-replay").Items[0]
		if rec.EventID != paid.EventID || rec.ErrorClass != "RETRYABLE" || rec.Attempts != 5 {
			t.Fatalf("dead letter = %s %s after %d attempts, want %s RETRYABLE after 5", rec.EventID, rec.ErrorClass, rec.Attempts, paid.EventID)
		}
		if got := s.summary("O-replay"); got != "NONE" {
			t.Fatalf("shipment = %s before the replay, want NONE", got)
		}

		if res := s.Replay(rec.ID); res.Outcome != "APPLIED" {
			t.Fatalf("replay = %+v, want APPLIED", res)
		}
		s.waitSummary("O-replay", "TO_SHIP [{A 3}] after [OrderPaid]")
		if n := s.ProcessedCount(paid.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
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
			`consumer_dead_letters_total{consumer="shipping-service",error_class="RETRYABLE"}`,
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

// With PARK_DEADLINE=1s, an OrderRefunded whose OrderPaid never comes is
// dead-lettered a second after it was parked, naming the state it waited
// for; the shipping code has no part in it.
func TestParkedEventPastTheDeadlineIsDeadLettered(t *testing.T) {
	s := startService(t, map[string]string{"PARK_DEADLINE": "1s", "PARK_SWEEP_INTERVAL": "50ms"})
	lost := newEvent(t, event.OrderRefunded, "O-gap", 5, refundedV2(items(item("A", 1)), items(item("A", 1))))
	s.Publish(lost)
	s.WaitFor("the lost refund dead-lettered", func() bool { return s.DeadLetters("O-gap").Count == 1 })
	rec := s.DeadLetters("O-gap").Items[0]
	if rec.EventID != lost.EventID || rec.ErrorClass != "PERMANENT" ||
		!strings.HasPrefix(rec.FailureReason, "WAITING_FOR_GAP: ") || !strings.Contains(rec.FailureReason, "TO_SHIP") {
		t.Fatalf("dead letter %+v, want PERMANENT WAITING_FOR_GAP naming the missing TO_SHIP", rec)
	}
	if got := s.summary("O-gap"); got != "NONE" {
		t.Fatalf("shipment = %s, want NONE (nothing applied)", got)
	}
	if got := s.Counter("consumer_gap_timeouts_total", `consumer="shipping-service"`); got != 1 {
		t.Fatalf("consumer_gap_timeouts_total = %v, want 1", got)
	}
}

func TestHTTPValidation(t *testing.T) {
	s := startService(t, nil)
	s.Publish(newEvent(t, event.OrderPaid, "O-known", 3, paidData(item("A", 1))))
	s.WaitFor("the shipment", func() bool { _, ok := s.shipment("O-known"); return ok })
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantBody string
	}{
		{"known order", "/shipments/O-known", http.StatusOK, `"status":"TO_SHIP"`},
		{"unknown order", "/shipments/O-unknown", http.StatusNotFound, `"businessCode":"SHIPMENT_NOT_FOUND"`},
		{"id with a space", "/shipments/O%20bad", http.StatusBadRequest, `"businessCode":"INVALID_REQUEST"`},
		{"id beyond the length rule", "/shipments/" + strings.Repeat("x", event.MaxIDLength+1), http.StatusBadRequest, `"businessCode":"INVALID_REQUEST"`},
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
