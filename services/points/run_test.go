package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/postgres/postgrestest"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
)

const waitTimeout = 30 * time.Second

// waitUntil polls cond until it holds, failing the test after waitTimeout.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", waitTimeout, what)
		}
		<-tick.C
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// logBuffer collects the service's log and prints it when a test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// service is one in-process points service with its own database,
// topics and Kafka client.
type service struct {
	t        *testing.T
	logs     *logBuffer
	base     string
	topic    string
	producer *kgo.Client
	probes   int
}

// startBroker starts an embedded broker; the caller closes it after the
// service stopped.
func startBroker(t *testing.T, addr string, topics ...string) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Addr: addr, Partitions: 4, Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startService runs the service against brokers (which need not be up yet)
// and waits until its HTTP API answers.
func startService(t *testing.T, brokers []string, topic string) *service {
	t.Helper()
	server := postgrestest.ServerURL(t)
	dbName := postgrestest.UniqueName("points")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, dbName); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	addr := freeAddr(t)
	env := map[string]string{
		"DATABASE_URL":           server,
		"DB_NAME":                dbName,
		"HTTP_ADDR":              addr,
		"KAFKA_BROKERS":          strings.Join(brokers, ","),
		"ORDER_EVENTS_TOPIC":     topic,
		"DLQ_TOPIC":              topic + ".dlq",
		"RETRY_INITIAL_INTERVAL": "10ms",
		"RETRY_MAX_INTERVAL":     "50ms",
		"LOG_LEVEL":              "debug",
	}
	logs := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, func(k string) string { return env[k] }, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if t.Failed() {
			t.Logf("service log:\n%s", logs.String())
		}
	})
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	s := &service{t: t, logs: logs, base: "http://" + addr, topic: topic, producer: producer}
	waitUntil(t, "the service to be ready", func() bool {
		select {
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, logs.String())
		default:
		}
		return s.get("/readyz", nil) == http.StatusOK
	})
	return s
}

// startWithBroker starts a broker with fresh topics and the service on it.
func startWithBroker(t *testing.T) *service {
	t.Helper()
	topic := postgrestest.UniqueName("order_events")
	b := startBroker(t, "127.0.0.1:0", topic, topic+".dlq")
	t.Cleanup(b.Close)
	return startService(t, b.Addrs(), topic)
}

func (s *service) do(method, path string, body io.Reader, out any) int {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			s.t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func (s *service) get(path string, out any) int { return s.do(http.MethodGet, path, nil, out) }

func (s *service) put(path, body string) int {
	return s.do(http.MethodPut, path, strings.NewReader(body), nil)
}

func (s *service) ledger(orderID string) ports.OrderResponse {
	s.t.Helper()
	var out ports.OrderResponse
	if code := s.get("/points/orders/"+orderID, &out); code != http.StatusOK {
		s.t.Fatalf("GET /points/orders/%s: %d", orderID, code)
	}
	return out
}

// entries lists an order's ledger as "TYPE points amount", in order.
func (s *service) entries(orderID string) []string {
	s.t.Helper()
	out := s.ledger(orderID)
	entries := make([]string, len(out.Entries))
	for i, e := range out.Entries {
		entries[i] = fmt.Sprintf("%s %d %s", e.Type, e.Points, e.Amount)
	}
	return entries
}

func (s *service) balance(customerID string) int64 {
	s.t.Helper()
	var out ports.BalanceResponse
	if code := s.get("/points/customers/"+customerID, &out); code != http.StatusOK {
		s.t.Fatalf("GET /points/customers/%s: %d", customerID, code)
	}
	return out.Balance
}

func (s *service) processedCount(eventID string) int {
	s.t.Helper()
	var out admin.ProcessedEvent
	if code := s.get("/admin/processed-events/"+eventID, &out); code != http.StatusOK {
		s.t.Fatalf("GET processed-events: %d", code)
	}
	return out.Count
}

func (s *service) deadLetters(orderID string) admin.DeadLetters {
	s.t.Helper()
	var out admin.DeadLetters
	if code := s.get("/admin/dlq?aggregateId="+orderID, &out); code != http.StatusOK {
		s.t.Fatalf("GET /admin/dlq: %d", code)
	}
	return out
}

// counter sums the samples of a counter on /metrics whose labels contain
// label (0 when absent).
func (s *service) counter(name, label string) float64 {
	s.t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// publish sends raw with key, as the order service's relay would.
func (s *service) publish(key string, value []byte, headers map[string]string) {
	s.t.Helper()
	rec := &kgo.Record{Topic: s.topic, Key: []byte(key), Value: value}
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		s.t.Fatalf("produce: %v", err)
	}
}

// publishEvent sends env keyed by its order, with the relay's headers.
func (s *service) publishEvent(env event.Envelope) {
	s.t.Helper()
	s.publishEventWithKey(env.AggregateID, env)
}

func (s *service) publishEventWithKey(key string, env event.Envelope) {
	s.t.Helper()
	msg, err := outbox.FromEnvelope(s.topic, env)
	if err != nil {
		s.t.Fatal(err)
	}
	s.publish(key, msg.Payload, msg.Headers)
}

// barrier returns once every message published before it with key has
// been handled: the consumer handles a partition in order, so when a probe
// order sent with the same key shows its effect, everything before it did.
func (s *service) barrier(key string) {
	s.t.Helper()
	s.probes++
	probe := fmt.Sprintf("probe-%s-%d", key, s.probes)
	s.publishEventWithKey(key, newEvent(s.t, event.OrderPaid, probe, 3, paidData("1.00")))
	waitUntil(s.t, "probe "+probe, func() bool { return s.ledger(probe).Count == 1 })
}

func newEvent(t *testing.T, typ event.Type, orderID string, version int64, data any) event.Envelope {
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
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount(refunded), Currency: "CNY",
		CustomerID: customer, Items: items()}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestService(t *testing.T) {
	s := startWithBroker(t)

	t.Run("the same OrderPaid twice earns 80 points once", func(t *testing.T) {
		s.t = t
		env := newEvent(t, event.OrderPaid, "O-dup", 3, paidBy("C-dup", "80.00"))
		s.publishEvent(env)
		s.publishEvent(env)
		s.barrier("O-dup")

		if got, want := s.entries("O-dup"), []string{"EARN 80 80.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if got := s.ledger("O-dup").Status; got != "EARNED" {
			t.Fatalf("status = %s, want EARNED", got)
		}
		if n := s.processedCount(env.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
		if b := s.balance("C-dup"); b != 80 {
			t.Fatalf("customer balance = %d, want 80", b)
		}
	})

	t.Run("OrderRefunded before OrderPaid applies both in order", func(t *testing.T) {
		s.t = t
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedData("C-reorder", "30.50"))
		pay := newEvent(t, event.OrderPaid, "O-reorder", 3, paidBy("C-reorder", "80.00"))
		s.publishEvent(refund)
		s.publishEvent(pay)
		waitUntil(t, "points reversed", func() bool { return s.ledger("O-reorder").Status == "REVERSED" })

		if got, want := s.entries("O-reorder"), []string{"EARN 80 80.00", "REVERSAL -30 30.50"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if b := s.balance("C-reorder"); b != 50 {
			t.Fatalf("customer balance = %d, want 50", b)
		}
		if s.processedCount(refund.EventID) != 1 || s.processedCount(pay.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a late OrderCreated is ignored", func(t *testing.T) {
		s.t = t
		s.publishEvent(newEvent(t, event.OrderPaid, "O-late", 3, paidData("12.00")))
		s.publishEvent(newEvent(t, event.OrderCreated, "O-late", 1, event.OrderCreatedData{
			CustomerID: "C-1", Currency: "CNY", Amount: amount("12.00"),
			Items: []event.PricedItem{{SKU: "SKU-1", Quantity: 1, UnitPrice: amount("12.00")}},
		}))
		s.barrier("O-late")

		if got, want := s.entries("O-late"), []string{"EARN 12 12.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
	})

	t.Run("invalid JSON is dead-lettered once and the next message is processed", func(t *testing.T) {
		s.t = t
		s.publish("O-bad", []byte(`{"eventId": "E-broken", not json`), nil)
		s.publishEvent(newEvent(t, event.OrderPaid, "O-bad", 3, paidData("5.00")))
		waitUntil(t, "the next message applied", func() bool { return s.ledger("O-bad").Count == 1 })

		dl := s.deadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("dead letters = %d, want 1", dl.Count)
		}
		if rec := dl.Items[0]; rec.ErrorClass != "PERMANENT" || rec.Consumer != "points-service" || rec.OriginalTopic != s.topic {
			t.Fatalf("dead letter = %+v, want PERMANENT from points-service on %s", rec, s.topic)
		}
	})

	t.Run("a reversal below zero is rejected without an entry, retry or DLQ", func(t *testing.T) {
		s.t = t
		s.publishEvent(newEvent(t, event.OrderPaid, "O-neg", 3, paidBy("C-neg", "10.00")))
		s.publishEvent(newEvent(t, event.OrderRefunded, "O-neg", 5, refundedData("C-neg", "20.00")))
		waitUntil(t, "reversal rejected", func() bool { return s.ledger("O-neg").Status == "REVERSAL_REJECTED" })

		if got, want := s.entries("O-neg"), []string{"EARN 10 10.00"}; !equal(got, want) {
			t.Fatalf("entries = %v, want %v", got, want)
		}
		if b := s.balance("C-neg"); b != 10 {
			t.Fatalf("customer balance = %d, want 10", b)
		}
		if n := s.deadLetters("O-neg").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a retryable failure is retried until it succeeds", func(t *testing.T) {
		s.t = t
		failures := s.counter("consumer_messages_total", `outcome="error"`)
		if code := s.put("/admin/failpoints/points.apply", `{"action":"error","times":2}`); code != http.StatusOK {
			t.Fatalf("arm fail point: %d", code)
		}
		s.publishEvent(newEvent(t, event.OrderPaid, "O-retry", 3, paidData("7.00")))
		waitUntil(t, "points earned", func() bool { return s.ledger("O-retry").Count == 1 })

		if got := s.counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if n := s.deadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("an unknown order and customer read as empty", func(t *testing.T) {
		s.t = t
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
	addr := freeAddr(t)
	topic := postgrestest.UniqueName("order_events")
	var b *broker.Broker
	t.Cleanup(func() { // after the service stopped
		if b != nil {
			b.Close()
		}
	})
	s := startService(t, []string{addr}, topic)
	waitUntil(t, "a reconnect warning", func() bool { return strings.Contains(s.logs.String(), messaging.ReconnectWarning) })
	if code := s.get("/healthz", nil); code != http.StatusOK {
		t.Fatalf("/healthz = %d while the broker is down, want 200", code)
	}

	b = startBroker(t, addr, topic, topic+".dlq")
	s.publishEvent(newEvent(t, event.OrderPaid, "O-late-broker", 3, paidData("3.00")))
	waitUntil(t, "points earned after the broker came up", func() bool { return s.ledger("O-late-broker").Count == 1 })
}
