package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

var client = &http.Client{Timeout: 10 * time.Second}

// do sends a request and returns the status and body; admin paths carry
// the admin token.
func (s *Suite) do(method, u string, body any) (int, []byte) {
	var r io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			r = bytes.NewReader(b)
		case string:
			r = bytes.NewReader([]byte(b))
		default:
			raw, err := json.Marshal(b)
			if err != nil {
				s.t.Fatal(err)
			}
			r = bytes.NewReader(raw)
		}
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Call sends a request to a service and returns status and body.
func (s *Suite) Call(service, method, path string, body any) (int, []byte) {
	s.t.Helper()
	return s.do(method, s.urls[service]+path, body)
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

// Publish writes an event straight to the order-events topic, as another
// producer (or a duplicate delivery) would.
func (s *Suite) Publish(envs ...event.Envelope) {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Broker.Addrs()...))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, env := range envs {
		raw, err := env.Marshal()
		if err != nil {
			s.t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: s.Topic, Key: []byte(env.AggregateID), Value: raw, Headers: []kgo.RecordHeader{
			{Key: "eventId", Value: []byte(env.EventID)},
			{Key: "eventType", Value: []byte(env.EventType)},
			{Key: "eventVersion", Value: []byte(fmt.Sprint(env.EventVersion))},
			{Key: "aggregateId", Value: []byte(env.AggregateID)},
			{Key: "traceparent", Value: []byte(env.Traceparent())},
		}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.t.Fatalf("publish: %v", err)
	}
}

// ProcessedEventCount is the consumer's dedup row count for eventID (0 or 1).
func (s *Suite) ProcessedEventCount(service, eventID string) int {
	s.t.Helper()
	out := s.JSON(service, "GET", "/admin/processed-events/"+url.PathEscape(eventID), nil, 200)
	return int(out["count"].(float64))
}

// WaitConsumed waits until every named consumer has processed eventID.
func (s *Suite) WaitConsumed(eventID string, services ...string) time.Duration {
	s.t.Helper()
	return s.WaitUntil(30*time.Second, "event "+eventID+" consumed", func() bool {
		for _, svc := range services {
			if s.ProcessedEventCount(svc, eventID) < 1 {
				return false
			}
		}
		return true
	})
}

// Stock is a SKU's inventory.
type Stock struct {
	SKU       string `json:"sku"`
	Available int    `json:"available"`
	Deducted  int    `json:"deducted"`
}

// SetStock seeds a SKU.
func (s *Suite) SetStock(sku string, available int) {
	s.t.Helper()
	s.JSON("inventory", "PUT", "/inventory/"+url.PathEscape(sku), map[string]any{"available": available}, 200)
}

// Inventory returns a SKU's stock.
func (s *Suite) Inventory(sku string) Stock {
	s.t.Helper()
	code, raw := s.Call("inventory", "GET", "/inventory/"+url.PathEscape(sku), nil)
	if code != 200 {
		s.t.Fatalf("inventory %s: %d %s", sku, code, raw)
	}
	var st Stock
	if err := json.Unmarshal(raw, &st); err != nil {
		s.t.Fatal(err)
	}
	return st
}

// PointsLedgerCount is the number of ledger entries of an order.
func (s *Suite) PointsLedgerCount(orderID string) int {
	s.t.Helper()
	out := s.JSON("points", "GET", "/points/orders/"+url.PathEscape(orderID), nil, 200)
	return int(out["count"].(float64))
}

// NotificationCount is the number of notifications sent for an order.
func (s *Suite) NotificationCount(orderID string) int {
	s.t.Helper()
	out := s.JSON("notification", "GET", "/notifications?orderId="+url.QueryEscape(orderID), nil, 200)
	return int(out["count"].(float64))
}

// Snapshot is the order's state across every service (README.md, API:
// GET /orders/{id}/snapshot).
type Snapshot struct {
	Order         string `json:"order"`
	OrderVersion  int64  `json:"orderVersion"`
	Payment       string `json:"payment"`
	Inventory     string `json:"inventory"`
	PointsLedger  int    `json:"pointsLedger"`
	Notifications int    `json:"notifications"`
	DLQ           int    `json:"dlq"`
}

// Snapshot reads GET /orders/{id}/snapshot.
func (s *Suite) Snapshot(orderID string) Snapshot {
	s.t.Helper()
	code, raw := s.Call("order", "GET", "/orders/"+url.PathEscape(orderID)+"/snapshot", nil)
	if code != 200 {
		s.t.Fatalf("snapshot %s: %d %s", orderID, code, raw)
	}
	var snap Snapshot
	if err := json.Unmarshal(raw, &snap); err != nil {
		s.t.Fatal(err)
	}
	return snap
}

// WaitSnapshot waits until the snapshot equals want and returns how long
// it took.
func (s *Suite) WaitSnapshot(orderID string, want Snapshot, timeout time.Duration) time.Duration {
	s.t.Helper()
	var last Snapshot
	took, ok := waitFor(timeout, func() bool {
		last = s.Snapshot(orderID)
		return last == want
	})
	if !ok {
		s.t.Fatalf("snapshot of %s did not converge within %v:\n got %+v\nwant %+v", orderID, timeout, last, want)
	}
	return took
}

// DLQCount sums the outstanding (not yet replayed) dead letters of an order
// over every consumer.
func (s *Suite) DLQCount(orderID string) int {
	s.t.Helper()
	n := 0
	for svc := range Consumers {
		out := s.JSON(svc, "GET", "/admin/dlq?status=DEAD&aggregateId="+url.QueryEscape(orderID), nil, 200)
		n += int(out["count"].(float64))
	}
	return n
}

// FailConsumer makes a consumer's apply step fail times times with a
// retryable error (the fail point "<service>.apply").
func (s *Suite) FailConsumer(service string, times int) {
	s.t.Helper()
	s.JSON(service, "PUT", "/admin/failpoints/"+service+".apply", map[string]any{"action": "error", "times": times}, 200)
}

// Order is what the walk-through creates.
type Order struct {
	ID       string
	Customer string
	Currency string
	Items    []Item
}

// Item is an order line.
type Item struct {
	SKU       string `json:"sku"`
	Quantity  int    `json:"quantity"`
	UnitPrice string `json:"unitPrice"`
}

// CreateOrder creates and checks out an order, returning its amount.
func (s *Suite) CreateOrder(o Order) string {
	s.t.Helper()
	out := s.JSON("order", "POST", "/orders", map[string]any{
		"orderId": o.ID, "customerId": o.Customer, "currency": o.Currency, "items": o.Items}, 200)
	if out["businessCode"] != "SUCCESS" {
		s.t.Fatalf("create %s: %v", o.ID, out)
	}
	out = s.JSON("order", "POST", "/orders/"+o.ID+"/checkout", nil, 200)
	if out["businessCode"] != "SUCCESS" || out["status"] != "PENDING_PAYMENT" {
		s.t.Fatalf("checkout %s: %v", o.ID, out)
	}
	return out["amount"].(string)
}

// Pay pays an order through the payment service and returns the answer.
func (s *Suite) Pay(orderID, amount, currency string) (int, map[string]any) {
	s.t.Helper()
	code, raw := s.Call("payment", "POST", "/payments", map[string]any{"orderId": orderID, "amount": amount, "currency": currency})
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Broker.Addrs()...), kgo.ConsumeTopics(s.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, s.Topic)
	if err != nil {
		s.t.Fatal(err)
	}
	remaining := int64(0)
	ends.Each(func(o kadm.ListedOffset) { remaining += o.Offset })
	n := 0
	for remaining > 0 && ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			remaining--
			var head struct {
				EventID string `json:"eventId"`
			}
			if json.Unmarshal(r.Value, &head) == nil && head.EventID == eventID {
				n++
			}
		}
	}
	return n
}

// Metric sums the samples of a Prometheus counter or gauge (for a
// histogram: its observation counts) on a service's /metrics whose labels
// include labels.
func (s *Suite) Metric(service, name string, labels map[string]string) float64 {
	s.t.Helper()
	code, raw := s.Call(service, "GET", "/metrics", nil)
	if code != 200 {
		s.t.Fatalf("%s /metrics: %d", service, code)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		s.t.Fatalf("%s /metrics: %v", service, err)
	}
	sum := 0.0
	f, ok := families[name]
	if !ok {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range labels {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == k && lp.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

// Run is a reconciliation run as POST /admin/reconciliation/runs answers it.
type Run struct {
	ID       int64  `json:"id"`
	Status   string `json:"status"`
	Checked  int    `json:"checked"`
	Actions  int    `json:"actions"`
	Error    string `json:"error"`
	Findings []struct {
		OrderID  string `json:"orderId"`
		Kind     string `json:"kind"`
		Service  string `json:"service"`
		Expected string `json:"expected"`
		Actual   string `json:"actual"`
		Action   string `json:"action"`
		Outcome  string `json:"outcome"`
	} `json:"findings"`
}

// Kinds lists the run's findings as "KIND service ACTION".
func (r Run) Kinds() []string {
	out := []string{}
	for _, f := range r.Findings {
		out = append(out, f.Kind+" "+f.Service+" "+f.Action)
	}
	return out
}

// Reconcile runs reconciliation over the orders named, whatever their age,
// and requires the run to succeed.
func (s *Suite) Reconcile(orderIDs ...string) Run {
	s.t.Helper()
	code, raw := s.Call("reconciliation", "POST", "/admin/reconciliation/runs", map[string]any{"orderIds": orderIDs, "minAge": "0s"})
	var r Run
	if code != 200 || json.Unmarshal(raw, &r) != nil || r.Status != "SUCCEEDED" {
		s.t.Fatalf("reconciliation run over %v: %d %s", orderIDs, code, raw)
	}
	return r
}

// Converged asks reconciliation whether every service has reached what
// the order's state requires.
func (s *Suite) Converged(orderID string) bool {
	s.t.Helper()
	out := s.JSON("reconciliation", "GET", "/admin/reconciliation/orders/"+url.PathEscape(orderID), nil, 200)
	return out["converged"] == true
}
