package harness

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// The vocabulary below is scripts/suiteapi, the suite's one API client,
// wrapped so that an error fails the test.

// ctx is the context of the harness's calls: a call may come from a
// cleanup, after the test's own context is cancelled.
func ctx() context.Context { return context.Background() }

// API is the suite's client, for what the vocabulary does not say.
func (s *Suite) API() *suiteapi.Client { return s.api }

// Call sends a request to a service and returns status and body; a
// service that cannot be reached answers 0.
func (s *Suite) Call(service, method, path string, body any) (int, []byte) {
	s.t.Helper()
	code, raw, _ := s.api.Raw(ctx(), service, method, path, nil, body)
	return code, raw
}

// JSON sends a request, requires status want and decodes the answer.
func (s *Suite) JSON(service, method, path string, body any, want int) map[string]any {
	s.t.Helper()
	code, raw := s.Call(service, method, path, body)
	if code != want {
		s.t.Fatalf("%s %s %s: %d %s, want %d", service, method, path, code, raw, want)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("%s %s %s: answer is not JSON: %s", service, method, path, raw)
	}
	return out
}

// must fails the test on err.
func (s *Suite) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// Publish writes an event straight to the order-events topic, as another
// producer (or a duplicate delivery) would.
func (s *Suite) Publish(envs ...event.Envelope) {
	s.t.Helper()
	s.must(s.api.Publish(ctx(), envs...))
}

// ProcessedEventCount is the consumer's dedup row count for eventID (0 or 1).
func (s *Suite) ProcessedEventCount(service, eventID string) int {
	s.t.Helper()
	n, err := s.api.ProcessedEventCount(ctx(), service, eventID)
	s.must(err)
	return n
}

// WaitConsumed waits until every named consumer has processed eventID.
func (s *Suite) WaitConsumed(eventID string, services ...string) time.Duration {
	s.t.Helper()
	took, err := s.api.WaitConsumed(ctx(), suiteapi.DefaultWait, eventID, services...)
	s.must(err)
	return took
}

// Stock is a SKU's inventory.
type Stock = suiteapi.Stock

// SetStock seeds a SKU.
func (s *Suite) SetStock(sku string, available int) {
	s.t.Helper()
	s.must(s.api.SetStock(ctx(), sku, available))
}

// Inventory returns a SKU's stock.
func (s *Suite) Inventory(sku string) Stock {
	s.t.Helper()
	st, err := s.api.Stock(ctx(), sku)
	s.must(err)
	return st
}

// pointsLedger reads an order's ledger entries.
func (s *Suite) pointsLedger(orderID string) []suiteapi.PointsEntry {
	s.t.Helper()
	entries, err := s.api.PointsLedger(ctx(), orderID)
	s.must(err)
	return entries
}

// PointsLedgerCount is the number of ledger entries of an order.
func (s *Suite) PointsLedgerCount(orderID string) int {
	s.t.Helper()
	return len(s.pointsLedger(orderID))
}

// Points is what an order is worth in points: the sum of its ledger
// entries.
func (s *Suite) Points(orderID string) int64 {
	s.t.Helper()
	var sum int64
	for _, e := range s.pointsLedger(orderID) {
		sum += e.Points
	}
	return sum
}

// Notice is a notification sent to the customer.
type Notice = suiteapi.Notice

// Notifications lists the notifications sent for an order, oldest first.
func (s *Suite) Notifications(orderID string) []Notice {
	s.t.Helper()
	items, err := s.api.Notifications(ctx(), orderID)
	s.must(err)
	return items
}

// NotificationCount is the number of notifications sent for an order.
func (s *Suite) NotificationCount(orderID string) int {
	s.t.Helper()
	return len(s.Notifications(orderID))
}

// Snapshot is the order's state across every service (README.md, API:
// GET /orders/{id}/snapshot).
type Snapshot = suiteapi.Snapshot

// Snapshot reads GET /orders/{id}/snapshot: what the services hold of the
// order (suiteapi.Held), so a test compares it with the snapshot it
// expects; reconciliation's verdict is Converged's.
func (s *Suite) Snapshot(orderID string) Snapshot {
	s.t.Helper()
	snap, err := s.api.Snapshot(ctx(), orderID)
	s.must(err)
	return suiteapi.Held(snap)
}

// WaitSnapshot waits until the snapshot equals want and returns how long
// it took.
func (s *Suite) WaitSnapshot(orderID string, want Snapshot, timeout time.Duration) time.Duration {
	s.t.Helper()
	took, err := s.api.WaitSnapshot(ctx(), orderID, want, timeout)
	s.must(err)
	return took
}

// DLQCount sums the outstanding (not yet replayed) dead letters of an order
// over every consumer.
func (s *Suite) DLQCount(orderID string) int {
	s.t.Helper()
	n, err := s.api.DLQCount(ctx(), orderID, slices.Sorted(maps.Keys(Consumers))...)
	s.must(err)
	return n
}

// FailConsumer makes a consumer's apply step fail times times with a
// retryable error (the fail point "<service>.apply").
func (s *Suite) FailConsumer(service string, times int) {
	s.t.Helper()
	s.must(s.api.FailConsumer(ctx(), service, times))
}

// ArmFailPoint arms a service's fail point at run time (times 0: every
// time; action "off" disarms it and keeps its hit count). A test that arms
// one checks afterwards that it fired: FailPointFired.
func (s *Suite) ArmFailPoint(service, name, action string, times int) {
	s.t.Helper()
	s.must(s.api.ArmFailPoint(ctx(), service, name, action, times))
}

// FailPointFired fails the test unless a service's fail point fired at
// least atLeast times since it was armed (GET /admin/failpoints). A point that
// ends its process cannot be read after; its exit status 137 is the proof.
func (s *Suite) FailPointFired(service, name string, atLeast int) {
	s.t.Helper()
	s.must(s.api.FailPointFired(ctx(), service, name, atLeast))
}

// WaitFailPointFired waits until a service's fail point has fired at least
// atLeast times, for a fault whose moment the test does not control (a held
// relay meeting its row).
func (s *Suite) WaitFailPointFired(service, name string, atLeast int, timeout time.Duration) {
	s.t.Helper()
	hits := 0
	if _, ok := waitFor(timeout, func() bool {
		var err error
		hits, err = s.api.FailPointHits(ctx(), service, name)
		s.must(err)
		return hits >= atLeast
	}); !ok {
		s.t.Fatalf("%s fail point %s fired %d times within %v, want at least %d: the fault never happened", service, name, hits, timeout, atLeast)
	}
}

// Order is what the walk-through creates.
type Order struct {
	ID       string
	Customer string
	Currency string
	Items    []Item
}

// Item is an order line.
type Item = suiteapi.Item

// CreateOrder creates and checks out an order, returning its amount.
func (s *Suite) CreateOrder(o Order) string {
	s.t.Helper()
	amount, err := s.api.PlaceOrder(ctx(), suiteapi.NewOrder{OrderID: o.ID, CustomerID: o.Customer, Currency: o.Currency, Items: o.Items})
	s.must(err)
	return amount
}

// PayOrder creates, checks out and pays an order, requires the payment
// service to take the money, and returns the amount.
func (s *Suite) PayOrder(o Order) string {
	s.t.Helper()
	amount := s.CreateOrder(o)
	if code, out := s.Pay(o.ID, amount, o.Currency); code != 200 || out["businessCode"] != "SUCCESS" {
		s.t.Fatalf("pay %s: %d %v", o.ID, code, out)
	}
	return amount
}

// OrderView is an order as GET /orders/{id} shows it.
type OrderView = suiteapi.OrderView

// Order reads GET /orders/{id}.
func (s *Suite) Order(orderID string) OrderView {
	s.t.Helper()
	o, err := s.api.Order(ctx(), orderID)
	s.must(err)
	return o
}

// Pay pays an order through the payment service and returns the answer,
// whatever its status.
func (s *Suite) Pay(orderID, amount, currency string) (int, map[string]any) {
	s.t.Helper()
	code, raw := s.Call(suiteapi.Payment, "POST", "/payments", paymentapi.PayRequest{OrderID: orderID, Amount: paymentapi.Amount(amount), Currency: currency})
	var out map[string]any
	_ = json.Unmarshal(raw, &out) // a refusal's body is judged by the test
	return code, out
}

// OutboxRow is an outbox row as the crash tests inspect it.
type OutboxRow struct {
	EventID       string    `db:"event_id"`
	EventType     string    `db:"event_type"`
	Status        string    `db:"status"`
	Attempts      int       `db:"attempts"`
	NextAttemptAt time.Time `db:"next_attempt_at"`
}

// OutboxRows reads a producer's outbox rows of one aggregate, oldest first.
func (s *Suite) OutboxRows(service, aggregateID string) []OutboxRow {
	s.t.Helper()
	var rows []OutboxRow
	if err := s.DB(service).Select(&rows, `SELECT event_id, event_type, status, attempts, next_attempt_at
		FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, aggregateID); err != nil {
		s.t.Fatal(err)
	}
	return rows
}

// OutboxRow returns the aggregate's outbox row of one event type.
func (s *Suite) OutboxRow(service, aggregateID, eventType string) OutboxRow {
	s.t.Helper()
	for _, r := range s.OutboxRows(service, aggregateID) {
		if r.EventType == eventType {
			return r
		}
	}
	s.t.Fatalf("%s has no %s outbox row for %s", service, eventType, aggregateID)
	return OutboxRow{}
}

// TopicCount counts the records on the order-events topic carrying eventID.
func (s *Suite) TopicCount(eventID string) int {
	s.t.Helper()
	n, err := s.api.CountSince(ctx(), nil, eventID)
	s.must(err)
	return n
}

// Metric sums the samples of a Prometheus counter or gauge (for a
// histogram: its observation counts) on a service's /metrics whose labels
// include labels.
func (s *Suite) Metric(service, name string, labels map[string]string) float64 {
	s.t.Helper()
	v, err := s.api.Metric(ctx(), service, name, labels)
	s.must(err)
	return v
}

// Run is a reconciliation run as GET /admin/reconciliation/runs/{id} shows
// it.
type Run = suiteapi.Run

// Reconcile runs reconciliation over the orders named (none: every order),
// whatever their age, waits for the run to end, and requires it to
// succeed.
func (s *Suite) Reconcile(orderIDs ...string) Run {
	s.t.Helper()
	r, err := s.api.Reconcile(ctx(), "", orderIDs...)
	if err != nil {
		s.t.Fatalf("reconciliation run over %v: %v", orderIDs, err)
	}
	return r
}

// Converged asks reconciliation whether every service has reached what
// the order's state requires.
func (s *Suite) Converged(orderID string) bool {
	s.t.Helper()
	c, err := s.api.Converged(ctx(), orderID)
	s.must(err)
	return c.Converged
}
