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
	"github.com/reliable-orders/fulfillment/services/inventory/internal/ports"
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

// service is one in-process inventory service with its own database,
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
	dbName := postgrestest.UniqueName("inventory")
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

func (s *service) setStock(sku string, available int) {
	s.t.Helper()
	if code := s.put("/inventory/"+sku, fmt.Sprintf(`{"available":%d}`, available)); code != http.StatusOK {
		s.t.Fatalf("PUT /inventory/%s: %d", sku, code)
	}
}

func (s *service) stock(sku string) ports.StockResponse {
	s.t.Helper()
	var out ports.StockResponse
	if code := s.get("/inventory/"+sku, &out); code != http.StatusOK {
		s.t.Fatalf("GET /inventory/%s: %d", sku, code)
	}
	return out
}

func (s *service) status(orderID string) string {
	s.t.Helper()
	var out ports.OrderResponse
	if code := s.get("/inventory/orders/"+orderID, &out); code != http.StatusOK {
		s.t.Fatalf("GET /inventory/orders/%s: %d", orderID, code)
	}
	return out.Status
}

func (s *service) movements(orderID string) []string {
	s.t.Helper()
	var out ports.MovementsResponse
	if code := s.get("/inventory/orders/"+orderID+"/movements", &out); code != http.StatusOK {
		s.t.Fatalf("GET movements of %s: %d", orderID, code)
	}
	moves := make([]string, len(out.Movements))
	for i, m := range out.Movements {
		moves[i] = fmt.Sprintf("%s %s %d", m.Kind, m.SKU, m.Delta)
	}
	return moves
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
	// An unknown SKU makes the probe a quick business rejection.
	s.publishEventWithKey(key, newEvent(s.t, event.OrderPaid, probe, 3, paidData(item("NO-SUCH-SKU", 1))))
	waitUntil(s.t, "probe "+probe, func() bool { return s.status(probe) == "REJECTED" })
}

func newEvent(t *testing.T, typ event.Type, orderID string, version int64, data any) event.Envelope {
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
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: amount("80.00"), Currency: "CNY",
		CustomerID: "C-1", Items: items}
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestService(t *testing.T) {
	s := startWithBroker(t)

	t.Run("the same OrderPaid twice deducts once", func(t *testing.T) {
		s.t = t
		s.setStock("DUP-1", 10)
		env := newEvent(t, event.OrderPaid, "O-dup", 3, paidData(item("DUP-1", 2)))
		s.publishEvent(env)
		s.publishEvent(env)
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
		if n := s.processedCount(env.EventID); n != 1 {
			t.Fatalf("processed-events count = %d, want 1", n)
		}
	})

	t.Run("OrderRefunded before OrderPaid applies both in order", func(t *testing.T) {
		s.t = t
		s.setStock("RE-1", 5)
		refund := newEvent(t, event.OrderRefunded, "O-reorder", 5, refundedData(item("RE-1", 3)))
		pay := newEvent(t, event.OrderPaid, "O-reorder", 3, paidData(item("RE-1", 3)))
		s.publishEvent(refund)
		s.publishEvent(pay)
		waitUntil(t, "order restocked", func() bool { return s.status("O-reorder") == "RESTOCKED" })

		if got, want := s.movements("O-reorder"), []string{"DEDUCT RE-1 -3", "RESTOCK RE-1 3"}; !equal(got, want) {
			t.Fatalf("movements = %v, want %v", got, want)
		}
		if st := s.stock("RE-1"); st.Available != 5 || st.Deducted != 0 {
			t.Fatalf("stock = %+v, want 5 available, 0 deducted", st)
		}
		if s.processedCount(refund.EventID) != 1 || s.processedCount(pay.EventID) != 1 {
			t.Fatal("each event should be processed once")
		}
	})

	t.Run("a late OrderCreated is ignored", func(t *testing.T) {
		s.t = t
		s.setStock("LATE-1", 5)
		s.publishEvent(newEvent(t, event.OrderPaid, "O-late", 3, paidData(item("LATE-1", 1))))
		created := newEvent(t, event.OrderCreated, "O-late", 1, event.OrderCreatedData{
			CustomerID: "C-1", Currency: "CNY", Amount: amount("80.00"),
			Items: []event.PricedItem{{SKU: "LATE-1", Quantity: 1, UnitPrice: amount("80.00")}},
		})
		s.publishEvent(created)
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
		s.t = t
		s.setStock("BAD-1", 5)
		s.publish("O-bad", []byte(`{"eventId": "E-broken", not json`), nil)
		s.publishEvent(newEvent(t, event.OrderPaid, "O-bad", 3, paidData(item("BAD-1", 1))))
		waitUntil(t, "the next message applied", func() bool { return s.status("O-bad") == "DEDUCTED" })

		dl := s.deadLetters("O-bad")
		if dl.Count != 1 {
			t.Fatalf("dead letters = %d, want 1", dl.Count)
		}
		if rec := dl.Items[0]; rec.ErrorClass != "PERMANENT" || rec.Consumer != "inventory-service" || rec.OriginalTopic != s.topic {
			t.Fatalf("dead letter = %+v, want PERMANENT from inventory-service on %s", rec, s.topic)
		}
	})

	t.Run("insufficient stock rejects the order without retry or DLQ", func(t *testing.T) {
		s.t = t
		s.setStock("SHORT-1", 1)
		s.setStock("SHORT-2", 5)
		s.publishEvent(newEvent(t, event.OrderPaid, "O-short", 3, paidData(item("SHORT-2", 1), item("SHORT-1", 2))))
		waitUntil(t, "order rejected", func() bool { return s.status("O-short") == "REJECTED" })

		if a, b := s.stock("SHORT-1"), s.stock("SHORT-2"); a.Available != 1 || b.Available != 5 || a.Deducted+b.Deducted != 0 {
			t.Fatalf("stock changed: %+v %+v", a, b)
		}
		if got := s.movements("O-short"); len(got) != 0 {
			t.Fatalf("movements = %v, want none", got)
		}
		if n := s.deadLetters("O-short").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a retryable failure is retried until it succeeds", func(t *testing.T) {
		s.t = t
		s.setStock("RETRY-1", 5)
		failures := s.counter("consumer_messages_total", `outcome="error"`)
		if code := s.put("/admin/failpoints/inventory.apply", `{"action":"error","times":2}`); code != http.StatusOK {
			t.Fatalf("arm fail point: %d", code)
		}
		s.publishEvent(newEvent(t, event.OrderPaid, "O-retry", 3, paidData(item("RETRY-1", 2))))
		waitUntil(t, "order deducted", func() bool { return s.status("O-retry") == "DEDUCTED" })

		if st := s.stock("RETRY-1"); st.Available != 3 {
			t.Fatalf("stock = %+v, want 3 available", st)
		}
		if got := s.counter("consumer_messages_total", `outcome="error"`) - failures; got != 2 {
			t.Fatalf("failed attempts = %v, want 2", got)
		}
		if n := s.deadLetters("O-retry").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a failure past the retry bound is dead-lettered as retryable", func(t *testing.T) {
		s.t = t
		s.setStock("EXHAUST-1", 5)
		if code := s.put("/admin/failpoints/inventory.apply", `{"action":"error","times":5}`); code != http.StatusOK {
			t.Fatalf("arm fail point: %d", code)
		}
		s.publishEvent(newEvent(t, event.OrderPaid, "O-exhaust", 3, paidData(item("EXHAUST-1", 2))))
		waitUntil(t, "dead letter", func() bool { return s.deadLetters("O-exhaust").Count == 1 })

		rec := s.deadLetters("O-exhaust").Items[0]
		if rec.ErrorClass != "RETRYABLE" || rec.Attempts != 5 {
			t.Fatalf("dead letter = %s after %d attempts, want RETRYABLE after 5", rec.ErrorClass, rec.Attempts)
		}
		if got := s.status("O-exhaust"); got != "NONE" {
			t.Fatalf("status = %s, want NONE", got)
		}
		if st := s.stock("EXHAUST-1"); st.Available != 5 {
			t.Fatalf("stock = %+v, want untouched", st)
		}
	})
}

func TestHTTPValidation(t *testing.T) {
	s := startWithBroker(t)
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
			s.t = t
			var body io.Reader
			if tt.method != http.MethodGet {
				body = strings.NewReader(tt.body)
			}
			if got := s.do(tt.method, tt.path, body, nil); got != tt.want {
				t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, got, tt.want)
			}
		})
	}
	s.t = t
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
	s.setStock("LATE-BROKER", 3)

	b = startBroker(t, addr, topic, topic+".dlq")
	s.publishEvent(newEvent(t, event.OrderPaid, "O-late-broker", 3, paidData(item("LATE-BROKER", 1))))
	waitUntil(t, "order deducted after the broker came up", func() bool { return s.status("O-late-broker") == "DEDUCTED" })
}
