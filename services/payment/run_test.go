package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/postgres/postgrestest"
	"github.com/reliable-orders/fulfillment/services/payment/internal/callback"
)

const testSecret = "run-test-secret"

// lockedBuffer collects the service's log lines from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// fakeOrderService answers order look-ups for O-1 and records the signed
// callbacks it receives.
type fakeOrderService struct {
	mu        sync.Mutex
	callbacks []callback.Callback
}

func (f *fakeOrderService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/orders/O-1":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"orderId":"O-1","status":"PENDING_PAYMENT","version":2,"amount":"80.00","currency":"CNY",`+
			`"customerId":"C-1","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/"):
		http.Error(w, `{"businessCode":"NOT_FOUND"}`, http.StatusNotFound)
	case r.Method == http.MethodPost && r.URL.Path == callback.Path:
		body, err := io.ReadAll(r.Body)
		if err != nil || !outbox.Verify([]byte(testSecret), body, r.Header.Get(outbox.SignatureHeader)) {
			http.Error(w, `{"businessCode":"INVALID_SIGNATURE"}`, http.StatusUnauthorized)
			return
		}
		var cb callback.Callback
		if err := json.Unmarshal(body, &cb); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.callbacks = append(f.callbacks, cb)
		f.mu.Unlock()
		_, _ = io.WriteString(w, `{"businessCode":"SUCCESS"}`)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeOrderService) received(t callback.Type) []callback.Callback {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []callback.Callback
	for _, cb := range f.callbacks {
		if cb.Type == t {
			out = append(out, cb)
		}
	}
	return out
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
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
	defer ln.Close()
	return ln.Addr().String()
}

type service struct {
	base   string
	logs   *lockedBuffer
	cancel context.CancelFunc
	done   chan error
}

// start runs the service with env on top of test defaults and stops it when
// the test ends.
func start(t *testing.T, env map[string]string) *service {
	t.Helper()
	server := postgrestest.ServerURL(t)
	dbName := postgrestest.UniqueName("payments")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, dbName); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	addr := freeAddr(t)
	vars := map[string]string{
		"DATABASE_URL":           server,
		"DB_NAME":                dbName,
		"HTTP_ADDR":              addr,
		"CALLBACK_SECRET":        testSecret,
		"OUTBOX_POLL_INTERVAL":   "10ms",
		"OUTBOX_BACKOFF_INITIAL": "10ms",
		"OUTBOX_BACKOFF_MAX":     "50ms",
		"RETRY_INITIAL_INTERVAL": "10ms",
		"RETRY_MAX_INTERVAL":     "50ms",
	}
	for k, v := range env {
		vars[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &service{base: "http://" + addr, logs: &lockedBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, func(k string) string { return vars[k] }, s.logs) }()
	t.Cleanup(func() { s.stop(t) })
	waitUntil(t, 30*time.Second, "the service is ready", func() bool {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("run ended early: %v\n%s", err, s.logs)
		default:
		}
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// stop cancels run like SIGTERM does and checks it ends cleanly.
func (s *service) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run = %v, want a clean stop", err)
		}
		s.done <- nil
	case <-time.After(30 * time.Second):
		t.Errorf("run did not stop within 30s of its context ending")
	}
}

func (s *service) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, out
}

func publishRefundRequested(t *testing.T, brokers []string, topic, paymentID string) event.Envelope {
	t.Helper()
	amount, _ := event.ParseMoney("80.00")
	env, err := event.New(event.OrderRefundRequested,
		event.Meta{AggregateID: "O-1", AggregateVersion: 4, Producer: "order-service"},
		event.OrderRefundRequestedData{RefundID: "R-1", PaymentID: paymentID, Amount: amount, Currency: "CNY"})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := outbox.FromEnvelope(topic, env)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := messaging.NewPublisher(brokers, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	wm := message.NewMessage(msg.EventID, msg.Payload)
	for k, v := range msg.Headers {
		wm.Metadata.Set(k, v)
	}
	if err := pub.Publish(topic, wm); err != nil {
		t.Fatal(err)
	}
	return env
}

func TestRunPaysAndRefundsEndToEnd(t *testing.T) {
	topic := postgrestest.UniqueName("order_events")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topic, topic + ".dlq"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	orders := &fakeOrderService{}
	ts := httptest.NewServer(orders)
	defer ts.Close()
	s := start(t, map[string]string{
		"KAFKA_BROKERS":      strings.Join(b.Addrs(), ","),
		"ORDER_EVENTS_TOPIC": topic,
		"DLQ_TOPIC":          topic + ".dlq",
		"ORDER_URL":          ts.URL,
		"ADMIN_TOKEN":        "",
	})
	defer s.stop(t)

	status, body := s.call(t, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`)
	paymentID, _ := body["paymentId"].(string)
	if status != http.StatusOK || body["businessCode"] != "SUCCESS" || paymentID == "" {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	waitUntil(t, 15*time.Second, "PAYMENT_SUCCEEDED is delivered", func() bool {
		return len(orders.received(callback.PaymentSucceeded)) == 1
	})
	if cb := orders.received(callback.PaymentSucceeded)[0]; cb.PaymentID != paymentID || cb.Amount.String() != "80.00" {
		t.Fatalf("PAYMENT_SUCCEEDED callback %+v", cb)
	}
	adminStatus, adminBody := s.call(t, http.MethodGet, "/admin/outbox/"+orders.received(callback.PaymentSucceeded)[0].CallbackID, "")
	if adminStatus != http.StatusOK || adminBody["status"] != outbox.StatusSent || adminBody["attempts"] != float64(1) {
		t.Fatalf("admin outbox answered %d %v", adminStatus, adminBody)
	}

	env := publishRefundRequested(t, b.Addrs(), topic, paymentID)
	waitUntil(t, 30*time.Second, "REFUND_SUCCEEDED is delivered", func() bool {
		return len(orders.received(callback.RefundSucceeded)) == 1
	})
	status, body = s.call(t, http.MethodGet, "/payments/orders/O-1", "")
	if status != http.StatusOK || body["status"] != "REFUNDED" || body["refunded"] != "80.00" {
		t.Fatalf("GET payment answered %d %v", status, body)
	}
	status, body = s.call(t, http.MethodGet, "/admin/processed-events/"+env.EventID, "")
	if status != http.StatusOK || body["count"] != float64(1) || body["consumer"] != "payment-service" {
		t.Fatalf("processed-events answered %d %v", status, body)
	}
	if status, body = s.call(t, http.MethodGet, "/admin/dlq?aggregateId=O-1", ""); status != http.StatusOK || body["count"] != float64(0) {
		t.Fatalf("dlq answered %d %v", status, body)
	}

	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"outbox_pending_events 0", "outbox_oldest_pending_age_seconds 0",
		"outbox_relay_published_total 2", `consumer_messages_total{consumer="payment-service",outcome="ok"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestRunServesWithoutBroker(t *testing.T) {
	orders := &fakeOrderService{}
	ts := httptest.NewServer(orders)
	defer ts.Close()
	s := start(t, map[string]string{
		"KAFKA_BROKERS": freeAddr(t), // nothing listens there
		"ORDER_URL":     ts.URL,
		"ADMIN_TOKEN":   "secret-token",
	})
	status, body := s.call(t, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`)
	if status != http.StatusOK || body["businessCode"] != "SUCCESS" {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	waitUntil(t, 15*time.Second, "the callback is delivered", func() bool {
		return len(orders.received(callback.PaymentSucceeded)) == 1
	})
	waitUntil(t, 30*time.Second, "the consumer logs that it retries", func() bool {
		return strings.Contains(s.logs.String(), messaging.ReconnectWarning)
	})
	if status, _ := s.call(t, http.MethodGet, "/admin/dlq", ""); status != http.StatusUnauthorized {
		t.Fatalf("admin without token answered %d, want 401", status)
	}
	s.stop(t)
}

func TestRunRefusesMalformedConfiguration(t *testing.T) {
	env := map[string]string{"OUTBOX_BATCH_SIZE": "many", "ORDER_URL": "order-service", "RETRY_MAX_ATTEMPTS": "0"}
	err := run(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err == nil {
		t.Fatal("run accepted a malformed configuration")
	}
	for _, want := range []string{"OUTBOX_BATCH_SIZE", "ORDER_URL", "RETRY_"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %v %s %s %s %s %s %d %v %d %v",
		cfg.DBName, cfg.HTTPAddr, cfg.DatabaseURL, cfg.Consumer.Brokers, cfg.Consumer.OrderEventsTopic, cfg.Consumer.DLQTopic,
		cfg.Consumer.ConsumerGroup, cfg.OrderURL, cfg.CallbackSecret, cfg.Consumer.Retry.MaxAttempts,
		cfg.Consumer.Retry.InitialInterval, cfg.Relay.BatchSize, cfg.Relay.PollInterval)
	want := "payments :8082 postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable [127.0.0.1:9092] order-events " +
		"order-events.dlq payment-service http://127.0.0.1:8081 dev-callback-secret 5 1s 500 100ms"
	if got != want {
		t.Fatalf("defaults\n got %s\nwant %s", got, want)
	}
}
