package ports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/ports"
)

const (
	secret = "test-callback-secret"
	// previousSecret is the secret before a rotation, still accepted.
	previousSecret = "test-callback-secret-before-rotation"
	adminToken     = "test-admin-token"
	orderBody      = `{"orderId":"O-1001","customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`
)

type stubPeers struct{ view app.PeerView }

func (s stubPeers) View(context.Context, string) app.PeerView { return s.view }

type env struct {
	t   *testing.T
	db  *sqlx.DB
	fp  *failpoint.Registry
	url string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, idempotency.Schema(), outbox.Schema(), postgres.MigrationSet{Name: "order", FS: os.DirFS("../../migrations")})
	fp, err := failpoint.New(failpoint.Config{Names: []string{adapters.FailPointBeforeCommit, ports.FailPointAfterCommit}})
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httpapi.New(httpapi.Config{AdminToken: adminToken, MapError: ports.MapError}, logger)
	// As pkg/service installs it.
	srv.Echo.Use(idempotency.NewStore(db, idempotency.Config{}).Middleware(logger, nil, nil))
	converged := true
	peers := stubPeers{app.PeerView{Payment: "SUCCEEDED", Inventory: "DEDUCTED", PointsLedger: 1, Notifications: 1, DLQ: 0,
		Converged: &converged, Findings: 0}}
	adminGroup := srv.Admin()
	ports.NewHandler(app.NewOrders(adapters.NewRepository(db, "order-events", fp, nil), peers),
		ports.CallbackKeys{Secrets: [][]byte{[]byte(secret), []byte(previousSecret)}, Window: 5 * time.Minute}, fp).Register(srv, adminGroup)
	admin.RegisterOutbox(adminGroup, db)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return &env{t: t, db: db, fp: fp, url: ts.URL}
}

type answer struct {
	Code int
	Body map[string]any
	Raw  string
}

func (e *env) do(method, path, body string, header map[string]string) answer {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	a := answer{Code: resp.StatusCode, Raw: string(raw)}
	_ = json.Unmarshal(raw, &a.Body)
	return a
}

func (e *env) post(path, body string) answer { return e.do(http.MethodPost, path, body, nil) }
func (e *env) get(path string) answer        { return e.do(http.MethodGet, path, "", nil) }

func (e *env) callback(body string) answer {
	return e.do(http.MethodPost, "/payments/callback", body, signed(secret, time.Now(), body))
}

// signed are the signature headers of body signed by key at t.
func signed(key string, t time.Time, body string) map[string]string {
	return event.CallbackHeaders([]byte(key), t, []byte(body))
}

func expect(t *testing.T, a answer, code int, businessCode string) {
	t.Helper()
	if a.Code != code || a.Body["businessCode"] != businessCode {
		t.Fatalf("got %d %s, want %d businessCode %s", a.Code, a.Raw, code, businessCode)
	}
}

func (e *env) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.db.Get(&n, query, args...); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env) events(orderID, eventType string) int {
	return e.count(`SELECT count(*) FROM outbox_events WHERE aggregate_id = $1 AND event_type = $2`, orderID, eventType)
}

func payBody(callbackID string) string {
	return fmt.Sprintf(`{"callbackId":%q,"type":"PAYMENT_SUCCEEDED","orderId":"O-1001","paymentId":"P-1","amount":"80.00","currency":"CNY"}`, callbackID)
}

// paidOrder creates O-1001 and takes it to PAID v3.
func refundCallback(callbackID, typ, refundID, amount, extra string) string {
	return fmt.Sprintf(`{"callbackId":%q,"type":%q,"orderId":"O-1001","paymentId":"P-1","amount":%q,"currency":"CNY","refundId":%q%s}`,
		callbackID, typ, amount, refundID, extra)
}

func (e *env) paidOrder() {
	e.t.Helper()
	expect(e.t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(e.t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	expect(e.t, e.callback(payBody("E-pay-1")), 200, "SUCCESS")
}

func TestCreateOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	traceparent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	a := e.do(http.MethodPost, "/orders", orderBody, map[string]string{"traceparent": traceparent})
	expect(t, a, 200, "SUCCESS")
	if a.Body["orderId"] != "O-1001" || a.Body["status"] != "CREATED" || a.Body["version"] != 1.0 || a.Body["amount"] != "80.00" {
		t.Fatalf("answer %s", a.Raw)
	}
	var payload []byte
	if err := e.db.Get(&payload, `SELECT payload FROM outbox_events WHERE aggregate_id = 'O-1001'`); err != nil {
		t.Fatal(err)
	}
	env, err := event.Parse(payload)
	if err != nil {
		t.Fatal(err)
	}
	if env.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("event traceId %s does not continue the request's trace", env.TraceID)
	}

	// The same order again is an idempotent repeat.
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	// Different content under the same id is a conflict.
	expect(t, e.post("/orders", strings.Replace(orderBody, `"quantity":2`, `"quantity":3`, 1)), 409, "ORDER_EXISTS")
	if n := e.count(`SELECT count(*) FROM outbox_events`); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}

	got := e.get("/orders/O-1001")
	if got.Code != 200 || got.Body["customerId"] != "C-1" || got.Body["currency"] != "CNY" || got.Body["amount"] != "80.00" {
		t.Fatalf("GET %s", got.Raw)
	}
	items, _ := got.Body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["unitPrice"] != "40.00" || items[0].(map[string]any)["quantity"] != 2.0 {
		t.Fatalf("items %s", got.Raw)
	}

	generated := e.post("/orders", `{"customerId":"C-2","currency":"USD","items":[{"sku":"A","quantity":1,"unitPrice":"0.01"}]}`)
	expect(t, generated, 200, "SUCCESS")
	if id, _ := generated.Body["orderId"].(string); !strings.HasPrefix(id, "O-") || len(id) < 10 || generated.Body["amount"] != "0.01" {
		t.Fatalf("generated %s", generated.Raw)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.paidOrder()
	items := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"sku":"SKU-%d","quantity":1,"unitPrice":"1.00"}`, i)
		}
		return `{"customerId":"C-1","currency":"CNY","items":[` + strings.Join(parts, ",") + `]}`
	}
	order := func(item string) string {
		return `{"customerId":"C-1","currency":"CNY","items":[` + item + `]}`
	}
	tests := []struct {
		name      string
		path      string
		body      string
		wantField string
	}{
		{"malformed JSON", "/orders", `{"customerId":`, "malformed JSON"},
		{"not an object", "/orders", `[1,2]`, "malformed JSON"},
		{"missing customerId", "/orders", `{"currency":"CNY","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "customerId"},
		{"missing currency", "/orders", `{"customerId":"C-1","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "currency"},
		{"lower-case currency", "/orders", `{"customerId":"C-1","currency":"cny","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "currency"},
		{"long currency", "/orders", `{"customerId":"C-1","currency":"CNYY","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "currency"},
		{"missing items", "/orders", `{"customerId":"C-1","currency":"CNY"}`, "items"},
		{"empty items", "/orders", `{"customerId":"C-1","currency":"CNY","items":[]}`, "items"},
		{"more than 100 items", "/orders", items(101), "items"},
		{"missing sku", "/orders", order(`{"quantity":1,"unitPrice":"1.00"}`), "items[0].sku"},
		{"zero quantity", "/orders", order(`{"sku":"A","quantity":0,"unitPrice":"1.00"}`), "items[0].quantity"},
		{"missing quantity", "/orders", order(`{"sku":"A","unitPrice":"1.00"}`), "items[0].quantity"},
		{"negative quantity", "/orders", order(`{"sku":"A","quantity":-2,"unitPrice":"1.00"}`), "items[0].quantity"},
		{"fractional quantity", "/orders", order(`{"sku":"A","quantity":1.5,"unitPrice":"1.00"}`), "quantity"},
		{"missing unitPrice", "/orders", order(`{"sku":"A","quantity":1}`), "items[0].unitPrice"},
		{"negative unitPrice", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"-1.00"}`), "items[0].unitPrice"},
		{"three decimal places", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"1.001"}`), "items[0].unitPrice"},
		{"not a number", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"abc"}`), "items[0].unitPrice"},
		{"exponent", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"1e3"}`), "items[0].unitPrice"},
		{"float unitPrice", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":40.0}`), "unitPrice"},
		{"duplicate SKUs", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"1"},{"sku":"B","quantity":1,"unitPrice":"1"},{"sku":"A","quantity":1,"unitPrice":"1"}`), "items[2].sku"},
		// An order nobody could pay (the payment service refuses amount 0).
		{"zero unitPrice", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"0"}`), "items[0].unitPrice"},
		{"zero unitPrice with places", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"0.00"}`), "items[0].unitPrice"},
		// SKUs inventory could never stock.
		{"sku with a space", "/orders", order(`{"sku":"SKU 1","quantity":1,"unitPrice":"1.00"}`), "items[0].sku"},
		{"sku too long", "/orders", order(`{"sku":"` + strings.Repeat("S", 129) + `","quantity":1,"unitPrice":"1.00"}`), "items[0].sku"},
		{"quantity above the maximum", "/orders", order(`{"sku":"A","quantity":1000001,"unitPrice":"1.00"}`), "items[0].quantity"},
		{"customerId with a space", "/orders", `{"customerId":"C 1","currency":"CNY","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "customerId"},
		{"unitPrice above the maximum", "/orders", order(`{"sku":"A","quantity":1,"unitPrice":"10000000000000000"}`), "items[0].unitPrice"},
		{"bad orderId", "/orders", `{"orderId":"O 1/2","customerId":"C-1","currency":"CNY","items":[{"sku":"A","quantity":1,"unitPrice":"1.00"}]}`, "orderId"},
		{"refund malformed JSON", "/orders/O-1001/refunds", `{"amount":`, "malformed JSON"},
		{"refund missing amount", "/orders/O-1001/refunds", `{}`, "amount"},
		{"refund zero", "/orders/O-1001/refunds", `{"amount":"0"}`, "amount"},
		{"refund zero with places", "/orders/O-1001/refunds", `{"amount":"0.00"}`, "amount"},
		{"refund negative", "/orders/O-1001/refunds", `{"amount":"-5.00"}`, "amount"},
		{"refund three places", "/orders/O-1001/refunds", `{"amount":"1.001"}`, "amount"},
		{"refund as a number", "/orders/O-1001/refunds", `{"amount":10}`, "amount"},
		{"cancel malformed JSON", "/orders/O-1001/cancel", `{"reason":`, "malformed JSON"},
		// A misspelt or extra field is refused, never dropped in silence.
		{"order unknown field", "/orders", strings.Replace(orderBody, `"currency"`, `"curency":"CNY","currency"`, 1), `unknown field "curency"`},
		{"order trailing bytes", "/orders", orderBody + `{"orderId":"O-1002"}`, "data after the JSON value"},
		{"refund unknown field", "/orders/O-1001/refunds", `{"amount":"1.00","amout":"2.00"}`, `unknown field "amout"`},
		{"refund trailing bytes", "/orders/O-1001/refunds", `{"amount":"1.00"} x`, "data after the JSON value"},
		{"cancel unknown field", "/orders/O-1001/cancel", `{"reasn":"x"}`, `unknown field "reasn"`},
		{"cancel trailing bytes", "/orders/O-1001/cancel", `{"reason":"x"}]`, "data after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.post(tt.path, tt.body)
			expect(t, a, 400, "INVALID_REQUEST")
			if msg, _ := a.Body["message"].(string); !strings.Contains(msg, tt.wantField) {
				t.Fatalf("message %q does not name %q", msg, tt.wantField)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM orders`); n != 1 {
		t.Fatalf("%d orders, want only the paid one", n)
	}
	if n := e.count(`SELECT count(*) FROM outbox_events`); n != 3 {
		t.Fatalf("%d outbox rows, want 3: bad input must write nothing", n)
	}
}

func TestBadCallbacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	tests := []struct {
		name      string
		body      string
		wantField string
	}{
		{"malformed JSON", `{"callbackId":`, "malformed JSON"},
		{"missing callbackId", `{"type":"PAYMENT_SUCCEEDED","orderId":"O-1001","paymentId":"P-1","amount":"80.00","currency":"CNY"}`, "callbackId"},
		{"unknown type", `{"callbackId":"E-1","type":"PAYMENT_FAILED","orderId":"O-1001","paymentId":"P-1","amount":"80.00","currency":"CNY"}`, "type"},
		{"missing orderId", `{"callbackId":"E-1","type":"PAYMENT_SUCCEEDED","paymentId":"P-1","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"missing paymentId", `{"callbackId":"E-1","type":"PAYMENT_SUCCEEDED","orderId":"O-1001","amount":"80.00","currency":"CNY"}`, "paymentId"},
		{"bad amount", `{"callbackId":"E-1","type":"PAYMENT_SUCCEEDED","orderId":"O-1001","paymentId":"P-1","amount":"80.001","currency":"CNY"}`, "amount"},
		{"bad currency", `{"callbackId":"E-1","type":"PAYMENT_SUCCEEDED","orderId":"O-1001","paymentId":"P-1","amount":"80.00","currency":"cny"}`, "currency"},
		{"refund without refundId", `{"callbackId":"E-1","type":"REFUND_SUCCEEDED","orderId":"O-1001","paymentId":"P-1","amount":"80.00","currency":"CNY"}`, "refundId"},
		{"unknown field", strings.Replace(payBody("E-1"), `"amount"`, `"amuont":"1.00","amount"`, 1), `unknown field "amuont"`},
		{"trailing bytes", payBody("E-1") + payBody("E-2"), "data after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.callback(tt.body)
			expect(t, a, 400, "INVALID_REQUEST")
			if msg, _ := a.Body["message"].(string); !strings.Contains(msg, tt.wantField) {
				t.Fatalf("message %q does not name %q", msg, tt.wantField)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM processed_callbacks`); n != 0 {
		t.Fatalf("%d processed callbacks after bad input", n)
	}
}

func TestUnknownOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, a := range []answer{
		e.get("/orders/O-404"),
		e.post("/orders/O-404/checkout", ""),
		e.post("/orders/O-404/refunds", `{"amount":"1.00"}`),
		e.post("/orders/O-404/cancel", ""),
		e.get("/orders/O-404/snapshot"),
		e.get("/orders/O-404/events"),
		e.callback(strings.ReplaceAll(payBody("E-1"), "O-1001", "O-404")),
	} {
		expect(t, a, 404, "ORDER_NOT_FOUND")
		if msg, _ := a.Body["message"].(string); !strings.Contains(msg, "O-404") {
			t.Fatalf("message %q does not name the order", msg)
		}
	}
}

// A reason is one line of text: a control character in it (NUL, which
// Postgres cannot store in the outbox's JSONB, or any other) is the
// client's mistake, answered 400 before anything is written, never a 500.
func TestCancelReasonWithAControlCharacter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	for _, reason := range []string{`a\u0000b`, `\u0000`, `line\nbreak`, `tab\there`, `bell\u0007`, `del\u007f`, `next line\u0085`, `c1\u009f`, `trailing newline\n`, `\u0085`} {
		t.Run(reason, func(t *testing.T) {
			a := e.post("/orders/O-1001/cancel", `{"reason":"`+reason+`"}`)
			expect(t, a, 400, "INVALID_REQUEST")
			if msg, _ := a.Body["message"].(string); !strings.Contains(msg, "reason") {
				t.Fatalf("message %q does not name the reason", msg)
			}
		})
	}
	if n := e.events("O-1001", "OrderCancelled"); n != 0 {
		t.Fatalf("%d OrderCancelled rows: a refused reason must write nothing", n)
	}
	// Printable text beyond ASCII stays a reason.
	expect(t, e.post("/orders/O-1001/cancel", `{"reason":"不想要了 – changed my mind"}`), 200, "SUCCESS")
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := `{"customerId":"` + strings.Repeat("x", 2<<20) + `"}`
	expect(t, e.post("/orders", big), 413, httpapi.CodeTooLarge)
	a := e.do(http.MethodPost, "/payments/callback", big, signed(secret, time.Now(), big))
	expect(t, a, 413, httpapi.CodeTooLarge)
	if n := e.count(`SELECT count(*) FROM orders`); n != 0 {
		t.Fatalf("%d orders", n)
	}
}

func TestCommandsAndRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")

	a := e.post("/orders/O-1001/refunds", `{"amount":"10.00"}`)
	expect(t, a, 200, "ORDER_NOT_REFUNDABLE")
	if a.Body["status"] != "CREATED" || a.Body["message"] == "" {
		t.Fatalf("refund of a created order: %s", a.Raw)
	}

	a = e.post("/orders/O-1001/checkout", "")
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "PENDING_PAYMENT" || a.Body["version"] != 2.0 || a.Body["amount"] != "80.00" {
		t.Fatalf("checkout %s", a.Raw)
	}
	a = e.post("/orders/O-1001/checkout", "")
	expect(t, a, 200, "SUCCESS")
	if a.Body["version"] != 2.0 {
		t.Fatalf("repeated checkout %s", a.Raw)
	}

	a = e.callback(payBody("E-pay-1"))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "PAID" || a.Body["version"] != 3.0 {
		t.Fatalf("payment %s", a.Raw)
	}
	expect(t, e.post("/orders/O-1001/cancel", ""), 200, "ORDER_NOT_CANCELLABLE")

	// A refund above the payment is requested here; the payment service
	// rejects it and the order goes back to PAID.
	a = e.post("/orders/O-1001/refunds", `{"amount":"500.00"}`)
	expect(t, a, 200, "SUCCESS")
	refundID, _ := a.Body["refundId"].(string)
	if a.Body["status"] != "REFUNDING" || a.Body["version"] != 4.0 || a.Body["amount"] != "500.00" || !strings.HasPrefix(refundID, "R-") {
		t.Fatalf("refund %s", a.Raw)
	}
	expect(t, e.post("/orders/O-1001/refunds", `{"amount":"1.00"}`), 200, "ORDER_NOT_REFUNDABLE")
	a = e.callback(refundCallback("E-rej", "REFUND_REJECTED", refundID, "500.00", `,"reason":"REFUND_EXCEEDS_PAYMENT"`))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "PAID" || a.Body["version"] != 5.0 {
		t.Fatalf("refund rejected %s", a.Raw)
	}

	// One unit comes back at its price: the order is PARTIALLY_REFUNDED.
	a = e.post("/orders/O-1001/refunds", `{"items":[{"sku":"SKU-1","quantity":1}]}`)
	expect(t, a, 200, "SUCCESS")
	refundID, _ = a.Body["refundId"].(string)
	if a.Body["amount"] != "40.00" || a.Body["version"] != 6.0 {
		t.Fatalf("refund of one unit %s", a.Raw)
	}
	expect(t, e.callback(refundCallback("E-other", "REFUND_SUCCEEDED", "R-other", "40.00", "")), 200, "REFUND_MISMATCH")
	a = e.callback(refundCallback("E-ref-1", "REFUND_SUCCEEDED", refundID, "40.00", ""))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "PARTIALLY_REFUNDED" || a.Body["version"] != 7.0 {
		t.Fatalf("partial refund %s", a.Raw)
	}
	// Only one unit is left to return.
	expect(t, e.post("/orders/O-1001/refunds", `{"items":[{"sku":"SKU-1","quantity":2}]}`), 200, "REFUND_EXCEEDS_ORDER")
	a = e.post("/orders/O-1001/refunds", `{"items":[{"sku":"SKU-1","quantity":1}]}`)
	expect(t, a, 200, "SUCCESS")
	refundID, _ = a.Body["refundId"].(string)
	a = e.callback(refundCallback("E-ref-2", "REFUND_SUCCEEDED", refundID, "40.00", ""))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "REFUNDED" || a.Body["version"] != 9.0 {
		t.Fatalf("last refund %s", a.Raw)
	}
	got := e.get("/orders/O-1001")
	returned, _ := got.Body["returnedItems"].([]any)
	refunds, _ := got.Body["refunds"].([]any)
	if got.Body["refundedAmount"] != "80.00" || got.Body["paymentId"] != "P-1" || len(returned) != 1 ||
		returned[0].(map[string]any)["quantity"] != 2.0 || len(refunds) != 3 {
		t.Fatalf("GET %s", got.Raw)
	}

	evs := e.get("/orders/O-1001/events")
	var types []string
	list, _ := evs.Body["events"].([]any)
	for i, item := range list {
		m := item.(map[string]any)
		types = append(types, m["eventType"].(string))
		if m["aggregateVersion"] != float64(i+1) || m["status"] != "PENDING" || m["eventId"] == "" {
			t.Fatalf("event %d: %v", i, m)
		}
	}
	want := "OrderCreated OrderCheckedOut OrderPaid OrderRefundRequested OrderRefundRejected " +
		"OrderRefundRequested OrderRefunded OrderRefundRequested OrderRefunded"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}

	expect(t, e.post("/orders", strings.Replace(orderBody, "O-1001", "O-2", 1)), 200, "SUCCESS")
	a = e.do(http.MethodPost, "/orders/O-2/cancel", `{"reason":"changed my mind"}`, nil)
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "CANCELLED" || a.Body["version"] != 2.0 {
		t.Fatalf("cancel %s", a.Raw)
	}
	expect(t, e.post("/orders/O-2/cancel", ""), 200, "SUCCESS")
	if n := e.events("O-2", "OrderCancelled"); n != 1 {
		t.Fatalf("%d OrderCancelled rows", n)
	}
}

// A payment that reaches an order after it was cancelled is not refused:
// the money has moved, so the order records OrderPaymentRejected (the
// payment service returns it) and, once returned, OrderPaymentReturned.
func TestPaymentForACancelledOrderIsReturned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/cancel", ""), 200, "SUCCESS")

	a := e.callback(payBody("E-late"))
	expect(t, a, 200, "PAYMENT_REJECTED")
	if a.Body["status"] != "CANCELLED" || a.Body["version"] != 4.0 || !strings.Contains(a.Body["message"].(string), "ORDER_CANCELLED") {
		t.Fatalf("late payment %s", a.Raw)
	}
	// The same payment told again (a new callback id) changes nothing more.
	expect(t, e.callback(payBody("E-late-again")), 200, "PAYMENT_REJECTED")
	refunds, _ := e.get("/orders/O-1001").Body["refunds"].([]any)
	if len(refunds) != 1 {
		t.Fatalf("refunds %v", refunds)
	}
	ret := refunds[0].(map[string]any)
	if ret["kind"] != "PAYMENT_RETURN" || ret["paymentId"] != "P-1" || ret["amount"] != "80.00" || ret["status"] != "REQUESTED" {
		t.Fatalf("return %v", ret)
	}

	a = e.callback(refundCallback("E-returned", "REFUND_SUCCEEDED", ret["refundId"].(string), "80.00", ""))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "CANCELLED" || a.Body["version"] != 5.0 {
		t.Fatalf("returned %s", a.Raw)
	}
	if n := e.events("O-1001", "OrderPaymentRejected") + e.events("O-1001", "OrderPaymentReturned"); n != 2 {
		t.Fatalf("%d return events, want OrderPaymentRejected and OrderPaymentReturned", n)
	}
	got := e.get("/orders/O-1001")
	if got.Body["refundedAmount"] != "0.00" || got.Body["refunds"].([]any)[0].(map[string]any)["status"] != "SUCCEEDED" {
		t.Fatalf("GET %s", got.Raw)
	}
}

func TestCallbackBadSignature(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	body := payBody("E-pay-1")
	now := time.Now()
	garbage := signed(secret, now, body)
	garbage[event.SignatureHeader] = "sha256=zz"
	noTimestamp := signed(secret, now, body)
	delete(noTimestamp, event.SignatureTimestampHeader)
	tests := []struct {
		name   string
		header map[string]string
		code   string
	}{
		{"missing", nil, "INVALID_SIGNATURE"},
		{"wrong key", signed("not-the-secret", now, body), "INVALID_SIGNATURE"},
		{"other body", signed(secret, now, body+" "), "INVALID_SIGNATURE"},
		{"garbage", garbage, "INVALID_SIGNATURE"},
		{"no timestamp", noTimestamp, "INVALID_SIGNATURE"},
		{"stale", signed(secret, now.Add(-6*time.Minute), body), "SIGNATURE_EXPIRED"},
		{"future", signed(secret, now.Add(6*time.Minute), body), "SIGNATURE_EXPIRED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, e.do(http.MethodPost, "/payments/callback", body, tt.header), 401, tt.code)
		})
	}
	got := e.get("/orders/O-1001")
	if got.Body["status"] != "PENDING_PAYMENT" || got.Body["version"] != 2.0 {
		t.Fatalf("order changed: %s", got.Raw)
	}
	if n := e.count(`SELECT count(*) FROM processed_callbacks`) + e.events("O-1001", "OrderPaid"); n != 0 {
		t.Fatalf("an unsigned callback left %d rows", n)
	}
}

// TestCallbackRotationAndReplay pays with a callback signed by the secret
// before a rotation, then replays the very same request (body, timestamp
// and signature) inside the window: it is accepted and changes nothing.
func TestCallbackRotationAndReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	body := payBody("E-pay-1")
	h := signed(previousSecret, time.Now().Add(-4*time.Minute), body)
	for range 2 {
		a := e.do(http.MethodPost, "/payments/callback", body, h)
		expect(t, a, 200, "SUCCESS")
		if a.Body["status"] != "PAID" || a.Body["version"] != 3.0 {
			t.Fatalf("callback answered %s, want PAID v3", a.Raw)
		}
	}
	if n := e.events("O-1001", "OrderPaid"); n != 1 {
		t.Fatalf("%d OrderPaid rows, want 1", n)
	}
}

func TestSameCallbackTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.paidOrder()
	a := e.callback(payBody("E-pay-1"))
	expect(t, a, 200, "SUCCESS")
	if a.Body["status"] != "PAID" || a.Body["version"] != 3.0 {
		t.Fatalf("repeat %s", a.Raw)
	}
	// A re-sent payment under a new callback id is a no-op by state.
	expect(t, e.callback(payBody("E-pay-2")), 200, "SUCCESS")
	if n := e.events("O-1001", "OrderPaid"); n != 1 {
		t.Fatalf("%d OrderPaid rows, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE status = 'PAID' AND version = 3`); n != 1 {
		t.Fatal("order is not PAID v3")
	}
}

func TestConcurrentDuplicateCallbacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	body := []byte(payBody("E-pay-1"))
	sig := signed(secret, time.Now(), string(body))
	codes := make([]int, 10)
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() {
			req, err := http.NewRequest(http.MethodPost, e.url+"/payments/callback", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header.Set("Content-Type", "application/json")
			for k, v := range sig {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			_ = resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i := range codes {
		if errs[i] != nil || codes[i] != 200 {
			t.Fatalf("request %d: %d %v", i, codes[i], errs[i])
		}
	}
	if n := e.events("O-1001", "OrderPaid"); n != 1 {
		t.Fatalf("%d OrderPaid rows, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM processed_callbacks`); n != 1 {
		t.Fatalf("%d processed callbacks, want 1", n)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE status = 'PAID' AND version = 3`); n != 1 {
		t.Fatal("order is not PAID v3")
	}
}

// TestFailureAfterCommit fails the callback after its transaction
// committed: the sender sees a 5xx and re-delivers, and the re-delivery is
// a no-op.
func TestFailureAfterCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/checkout", ""), 200, "SUCCESS")
	if err := e.fp.Set(ports.FailPointAfterCommit, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	a := e.callback(payBody("E-pay-1"))
	if a.Code != 500 {
		t.Fatalf("got %d %s, want 500", a.Code, a.Raw)
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE status = 'PAID'`); n != 1 {
		t.Fatal("the change before the fail point was not committed")
	}
	expect(t, e.callback(payBody("E-pay-1")), 200, "SUCCESS")
	if n := e.events("O-1001", "OrderPaid"); n != 1 {
		t.Fatalf("%d OrderPaid rows, want 1", n)
	}
	if n := e.fp.Hits(ports.FailPointAfterCommit); n != 1 {
		t.Fatalf("%s fired %d times, want 1", ports.FailPointAfterCommit, n)
	}
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.paidOrder()
	a := e.get("/orders/O-1001/snapshot")
	want := `{"order":"PAID","orderVersion":3,"payment":"SUCCEEDED","inventory":"DEDUCTED","pointsLedger":1,"notifications":1,"dlq":0,"converged":true,"findings":0}`
	if a.Code != 200 || strings.TrimSpace(a.Raw) != want {
		t.Fatalf("got %d %s, want %s", a.Code, a.Raw, want)
	}
}

func TestAdminOutbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	var eventID string
	if err := e.db.Get(&eventID, `SELECT event_id FROM outbox_events`); err != nil {
		t.Fatal(err)
	}
	auth := map[string]string{"Authorization": "Bearer " + adminToken}

	expect(t, e.do(http.MethodGet, "/admin/outbox/"+eventID, "", nil), 401, httpapi.CodeUnauthorized)
	a := e.do(http.MethodGet, "/admin/outbox/"+eventID, "", auth)
	if a.Code != 200 || a.Body["eventId"] != eventID || a.Body["status"] != "PENDING" || a.Body["attempts"] != 0.0 {
		t.Fatalf("outbox event %d %s", a.Code, a.Raw)
	}
	expect(t, e.do(http.MethodGet, "/admin/outbox/E-404", "", auth), 404, "EVENT_NOT_FOUND")
	a = e.do(http.MethodGet, "/admin/outbox", "", auth)
	if a.Code != 200 || a.Body["pending"] != 1.0 || a.Body["events"] != nil {
		t.Fatalf("backlog %d %s", a.Code, a.Raw)
	}
	var orderID string
	if err := e.db.Get(&orderID, `SELECT aggregate_id FROM outbox_events`); err != nil {
		t.Fatal(err)
	}
	a = e.do(http.MethodGet, "/admin/outbox?aggregateId="+orderID, "", auth)
	rows, _ := a.Body["events"].([]any)
	if a.Code != 200 || len(rows) != 1 || rows[0].(map[string]any)["eventId"] != eventID || rows[0].(map[string]any)["nextAttemptAt"] == nil {
		t.Fatalf("rows of %s: %d %s", orderID, a.Code, a.Raw)
	}
	a = e.do(http.MethodGet, "/admin/outbox?aggregateId=O-none", "", auth)
	if a.Code != 200 || a.Body["events"] != nil {
		t.Fatalf("rows of an unknown order: %d %s", a.Code, a.Raw)
	}
}

// A refund of 30.00 and one unit, sent again with its key, is one refund:
// the retry is the first answer marked as a replay, and once the key is
// gone (a crash before its answer was kept, or its expiry) the request
// runs again and finds the refund it made, named after the key.
func TestKeyedRefundRefundsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.paidOrder()
	const body = `{"amount":"30.00","items":[{"sku":"SKU-1","quantity":1}]}`
	keyed := map[string]string{idempotency.Header: "refund-1"}
	first := e.do(http.MethodPost, "/orders/O-1001/refunds", body, keyed)
	expect(t, first, 200, "SUCCESS")
	retry := e.do(http.MethodPost, "/orders/O-1001/refunds", body, keyed)
	if retry.Raw != first.Raw {
		t.Fatalf("retry %s, want the first answer %s", retry.Raw, first.Raw)
	}
	if _, err := e.db.Exec(`DELETE FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	rerun := e.do(http.MethodPost, "/orders/O-1001/refunds", body, keyed)
	expect(t, rerun, 200, "SUCCESS")
	if rerun.Body["refundId"] != first.Body["refundId"] {
		t.Fatalf("run again: refund %v, want %v", rerun.Body["refundId"], first.Body["refundId"])
	}
	if n := e.count(`SELECT count(*) FROM order_refunds WHERE order_id = 'O-1001'`); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
	if n := e.events("O-1001", "OrderRefundRequested"); n != 1 {
		t.Fatalf("%d OrderRefundRequested events, want 1", n)
	}
	// Without a key each request is a refund of its own, as before.
	expect(t, e.callback(refundCallback("E-refund-1", "REFUND_SUCCEEDED", first.Body["refundId"].(string), "30.00", "")), 200, "SUCCESS")
	expect(t, e.post("/orders/O-1001/refunds", `{"amount":"1.00"}`), 200, "SUCCESS")
	if n := e.count(`SELECT count(*) FROM order_refunds WHERE order_id = 'O-1001'`); n != 2 {
		t.Fatalf("%d refunds after an unkeyed one, want 2", n)
	}
}

// POST /orders without an orderId, sent again with its key, is one order,
// also once the key is gone.
func TestKeyedCreateWithoutIDMakesOneOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const body = `{"customerId":"C-key","currency":"CNY","items":[{"sku":"SKU-1","quantity":1,"unitPrice":"40.00"}]}`
	keyed := map[string]string{idempotency.Header: "create-1"}
	first := e.do(http.MethodPost, "/orders", body, keyed)
	expect(t, first, 200, "SUCCESS")
	if retry := e.do(http.MethodPost, "/orders", body, keyed); retry.Raw != first.Raw {
		t.Fatalf("retry %s, want %s", retry.Raw, first.Raw)
	}
	if _, err := e.db.Exec(`DELETE FROM idempotency_keys`); err != nil {
		t.Fatal(err)
	}
	if rerun := e.do(http.MethodPost, "/orders", body, keyed); rerun.Body["orderId"] != first.Body["orderId"] {
		t.Fatalf("run again: %s, want order %v", rerun.Raw, first.Body["orderId"])
	}
	if n := e.count(`SELECT count(*) FROM orders WHERE customer_id = 'C-key'`); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}
