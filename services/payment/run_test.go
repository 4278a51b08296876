package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
)

const testSecret = "run-test-secret"

// fakeOrderService answers order look-ups for O-1 and records the signed
// callbacks it receives.
type fakeOrderService struct {
	mu        sync.Mutex
	callbacks []event.Callback
}

func (f *fakeOrderService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/orders/O-1":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"orderId":"O-1","status":"PENDING_PAYMENT","version":2,"amount":"80.00","currency":"CNY",`+
			`"customerId":"C-1","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/"):
		http.Error(w, `{"businessCode":"NOT_FOUND"}`, http.StatusNotFound)
	case r.Method == http.MethodPost && r.URL.Path == adapters.CallbackPath:
		body, err := io.ReadAll(r.Body)
		if err != nil || event.VerifyCallback([][]byte{[]byte(testSecret)}, body, r.Header.Get(event.SignatureTimestampHeader),
			r.Header.Get(event.SignatureHeader), time.Now(), time.Minute) != nil {
			http.Error(w, `{"businessCode":"INVALID_SIGNATURE"}`, http.StatusUnauthorized)
			return
		}
		var cb event.Callback
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

func (f *fakeOrderService) received(t rules.CallbackType) []event.Callback {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []event.Callback
	for _, cb := range f.callbacks {
		if cb.Type == t {
			out = append(out, cb)
		}
	}
	return out
}

// start runs the service with env on top of the standard test environment
// and stops it when the test ends.
func start(t *testing.T, env map[string]string, withBroker bool) *servicetest.Service {
	t.Helper()
	vars := map[string]string{
		"CALLBACK_SECRET":        testSecret,
		"OUTBOX_POLL_INTERVAL":   "10ms",
		"OUTBOX_BACKOFF_INITIAL": "10ms",
		"OUTBOX_BACKOFF_MAX":     "50ms",
	}
	for k, v := range env {
		vars[k] = v
	}
	if withBroker {
		return servicetest.Start(t, run, vars)
	}
	return servicetest.StartWithoutBroker(t, run, vars)
}

// call sends a request and decodes a JSON answer.
func call(s *servicetest.Service, method, path, body string) (int, map[string]any) {
	s.T().Helper()
	code, raw := s.Do(method, path, body)
	var out map[string]any
	if json.Valid(raw) {
		if err := json.Unmarshal(raw, &out); err != nil {
			s.T().Fatal(err)
		}
	}
	return code, out
}

func TestRunPaysAndRefundsEndToEnd(t *testing.T) {
	orders := &fakeOrderService{}
	ts := httptest.NewServer(orders)
	defer ts.Close()
	s := start(t, map[string]string{"ORDER_URL": ts.URL, "ADMIN_TOKEN": ""}, true)
	defer s.Stop()

	status, body := call(s, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`)
	paymentID, _ := body["paymentId"].(string)
	if status != http.StatusOK || body["businessCode"] != "SUCCESS" || paymentID == "" {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	s.WaitFor("PAYMENT_SUCCEEDED is delivered", func() bool {
		return len(orders.received(rules.CallbackPaymentSucceeded)) == 1
	})
	if cb := orders.received(rules.CallbackPaymentSucceeded)[0]; cb.PaymentID != paymentID || (cb.Amount == nil || *cb.Amount != "80.00") {
		t.Fatalf("PAYMENT_SUCCEEDED callback %+v", cb)
	}
	// The relay marks the row SENT just after the order service answered.
	var adminStatus int
	var adminBody map[string]any
	s.WaitFor("the callback row marked SENT", func() bool {
		adminStatus, adminBody = call(s, http.MethodGet, "/admin/outbox/"+orders.received(rules.CallbackPaymentSucceeded)[0].CallbackID, "")
		return adminStatus == http.StatusOK && adminBody["status"] == outbox.StatusSent
	})
	if adminBody["attempts"] != float64(1) {
		t.Fatalf("admin outbox answered %d %v, want SENT after 1 attempt", adminStatus, adminBody)
	}

	env := consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", paymentID, "80.00")
	s.Publish(env)
	s.WaitFor("REFUND_SUCCEEDED is delivered", func() bool {
		return len(orders.received(rules.CallbackRefundSucceeded)) == 1
	})
	status, body = call(s, http.MethodGet, "/payments/orders/O-1", "")
	if status != http.StatusOK || body["status"] != "REFUNDED" || body["refunded"] != "80.00" {
		t.Fatalf("GET payment answered %d %v", status, body)
	}
	status, body = call(s, http.MethodGet, "/admin/processed-events/"+env.EventID, "")
	if status != http.StatusOK || body["count"] != float64(1) || body["consumer"] != "payment-service" {
		t.Fatalf("processed-events answered %d %v", status, body)
	}
	if status, body = call(s, http.MethodGet, "/admin/dlq?aggregateId=O-1", ""); status != http.StatusOK || body["count"] != float64(0) {
		t.Fatalf("dlq answered %d %v", status, body)
	}
	// The reconciliation view reads the refund consumer's own version guard.
	code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-1"]}`)
	if code != http.StatusOK || !strings.Contains(string(raw), `"status":"REFUNDED"`) ||
		!strings.Contains(string(raw), fmt.Sprintf(`"consumer":{"version":%d,"state":"REFUND_HANDLED"},"deadLetters":[]`, env.AggregateVersion)) {
		t.Fatalf("reconciliation view: %d %s", code, raw)
	}

	wants := []string{"outbox_pending_events 0", "outbox_oldest_pending_age_seconds 0",
		"outbox_relay_published_total 2", `consumer_messages_total{consumer="payment-service",outcome="ok"} 1`}
	s.WaitFor("both callbacks marked SENT in the metrics", func() bool {
		_, metrics := s.Do(http.MethodGet, "/metrics", "")
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				return false
			}
		}
		return true
	})
}

// A web page open while the suite runs can make the browser send the
// operator's refund — no admin token in development mode — as a no-cors
// fetch: a body without Content-Type: application/json, from a foreign
// Origin, or, rebinding its own name to 127.0.0.1, to a foreign Host. Each
// is refused and no refund is made; the same refund sent as the suite's
// clients send it is.
func TestRunRefusesARefundAWebPageCouldSend(t *testing.T) {
	orders := &fakeOrderService{}
	ts := httptest.NewServer(orders)
	defer ts.Close()
	s := start(t, map[string]string{"ORDER_URL": ts.URL, "ADMIN_TOKEN": ""}, true)
	defer s.Stop()
	if status, body := call(s, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`); status != http.StatusOK || body["businessCode"] != "SUCCESS" {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	const path = "/admin/payments/orders/O-1/refunds"
	const refund = `{"refundId":"R-web","amount":"10.00","reason":"WEB"}`
	host := strings.TrimPrefix(s.URL, "http://")
	tests := []struct {
		name   string
		header http.Header
		status int
		code   string
	}{
		{"no-cors fetch: no Content-Type, foreign Origin", http.Header{"Origin": {"http://evil.example"}}, http.StatusForbidden, "FORBIDDEN_ORIGIN"},
		{"text/plain from a foreign Origin", http.Header{"Origin": {"http://evil.example"}, "Content-Type": {"text/plain"}}, http.StatusForbidden, "FORBIDDEN_ORIGIN"},
		{"no Content-Type", http.Header{}, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"text/plain", http.Header{"Content-Type": {"text/plain;charset=UTF-8"}}, http.StatusUnsupportedMediaType, "UNSUPPORTED_MEDIA_TYPE"},
		{"rebound Host", http.Header{"Host": {"evil.example:" + host[strings.LastIndex(host, ":")+1:]}, "Content-Type": {"application/json"}}, http.StatusForbidden, "FORBIDDEN_HOST"},
	}
	for _, tt := range tests {
		code, raw := s.DoRaw(http.MethodPost, path, refund, tt.header)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if code != tt.status || body["businessCode"] != tt.code || body["message"] == "" {
			t.Errorf("%s: %d %s, want %d %s", tt.name, code, raw, tt.status, tt.code)
		}
	}
	status, body := call(s, http.MethodGet, "/payments/orders/O-1", "")
	if status != http.StatusOK || body["status"] != "SUCCEEDED" || body["refunded"] != "0.00" {
		t.Fatalf("after the refused refunds the payment is %d %v, want SUCCEEDED with nothing refunded", status, body)
	}
	if code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-1"]}`); code != http.StatusOK || !strings.Contains(string(raw), `"refunds":[]`) {
		t.Fatalf("after the refused refunds the reconciliation view is %d %s, want no refund", code, raw)
	}
	code, raw := s.DoRaw(http.MethodPost, path, refund, http.Header{"Content-Type": {"application/json"}, "Origin": {s.URL}, "X-Operator": {"ops"}})
	if code != http.StatusOK || !strings.Contains(string(raw), `"SUCCEEDED"`) {
		t.Fatalf("the refund as JSON from the service's own origin answered %d %s", code, raw)
	}
}

func TestRunServesWithoutBroker(t *testing.T) {
	orders := &fakeOrderService{}
	ts := httptest.NewServer(orders)
	defer ts.Close()
	s := start(t, map[string]string{"ORDER_URL": ts.URL, "ADMIN_TOKEN": "secret-token"}, false) // no broker ever starts
	status, body := call(s, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`)
	if status != http.StatusOK || body["businessCode"] != "SUCCESS" {
		t.Fatalf("POST /payments answered %d %v", status, body)
	}
	s.WaitFor("the callback is delivered", func() bool {
		return len(orders.received(rules.CallbackPaymentSucceeded)) == 1
	})
	s.WaitFor("the consumer logs that it retries", func() bool {
		return strings.Contains(s.Logs(), consumer.ReconnectWarning)
	})
	if status, _ := call(s, http.MethodGet, "/admin/dlq", ""); status != http.StatusUnauthorized {
		t.Fatalf("admin without token answered %d, want 401", status)
	}
	s.Stop()
}

func TestRunRefusesMalformedConfiguration(t *testing.T) {
	env := map[string]string{"OUTBOX_BATCH_SIZE": "many", "ORDER_URL": "order-service", "RETRY_MAX_ATTEMPTS": "0"}
	err := run(context.Background(), func(k string) string { return env[k] }, io.Discard)
	if err == nil {
		t.Fatal("run accepted a malformed configuration")
	}
	// Outside development mode the missing secrets are named too.
	for _, want := range []string{"OUTBOX_BATCH_SIZE", "ORDER_URL", "RETRY_", "ADMIN_TOKEN", "CALLBACK_SECRET"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(func(k string) string {
		if k == "SUITE_MODE" {
			return "development"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %s %s %v %s %s %s %s %s %d %v %d %v",
		cfg.DBName, cfg.HTTPAddr, cfg.DatabaseURL, cfg.Consumer.Brokers, cfg.Consumer.OrderEventsTopic, cfg.Consumer.DLQTopic,
		cfg.Consumer.ConsumerGroup, cfg.OrderURL, cfg.Callbacks.Secret, cfg.Consumer.Retry.MaxAttempts,
		cfg.Consumer.Retry.InitialInterval, cfg.Relay.BatchSize, cfg.Relay.PollInterval)
	want := "payments 127.0.0.1:8082 postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable [127.0.0.1:9092] order-events " +
		"order-events.dlq payment-service http://127.0.0.1:8081 dev-callback-secret 5 1s 2000 100ms"
	if got != want {
		t.Fatalf("defaults\n got %s\nwant %s", got, want)
	}
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	start(t, map[string]string{"ADMIN_TOKEN": "secret-token"}, false).CheckOpenAPI("openapi.json")
}
