package ports_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
	"github.com/reliable-orders/fulfillment/services/payment/internal/ports"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// fakeOrders stands in for the order service, which runs in another process.
type fakeOrders struct {
	mu      sync.Mutex
	orders  map[string]payment.Order
	err     error
	asked   int
	refunds []forwarded
}

func (f *fakeOrders) Order(_ context.Context, orderID string) (payment.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if f.err != nil {
		return payment.Order{}, f.err
	}
	o, ok := f.orders[orderID]
	if !ok {
		return payment.Order{}, fmt.Errorf("%w: %s", payment.ErrOrderNotFound, orderID)
	}
	return o, nil
}

// RequestRefund records an operator's refund as the order service would:
// it answers SUCCESS and REFUNDING, and keeps what it was asked.
func (f *fakeOrders) RequestRefund(_ context.Context, orderID string, r app.OperatorRefund) (orderapi.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refunds = append(f.refunds, forwarded{orderID: orderID, refund: r})
	return orderapi.Result{BusinessCode: "SUCCESS", Status: "REFUNDING", Version: 4, RefundID: r.RefundID}, nil
}

// forwarded is an operator's refund the payment service forwarded.
type forwarded struct {
	orderID string
	refund  app.OperatorRefund
}

func (f *fakeOrders) set(o payment.Order) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.orders[o.ID] = o
}

func pendingOrder(id string) payment.Order {
	return payment.Order{ID: id, Status: payment.OrderStatusPendingPayment, Version: 2,
		Amount: decimal.RequireFromString("80.00"), Currency: "CNY"}
}

type fixture struct {
	db     *sqlx.DB
	orders *fakeOrders
	url    string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, outbox.Schema(),
		postgres.MigrationSet{Name: "payment", FS: os.DirFS("../../migrations")})
	orders := &fakeOrders{orders: map[string]payment.Order{}}
	orders.set(pendingOrder("O-1"))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httpapi.New(httpapi.Config{MapError: ports.MapError}, logger)
	ports.NewHandler(orders, adapters.NewRepository(db, nil)).Register(srv.Echo)
	admin.RegisterOutbox(srv.Admin(), db)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return &fixture{db: db, orders: orders, url: ts.URL}
}

type answer struct {
	status int
	body   map[string]any
	header http.Header
}

func (a answer) field(name string) string {
	s, _ := a.body[name].(string)
	return s
}

func (f *fixture) do(t *testing.T, method, path, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s answered %d with non-JSON %q", method, path, resp.StatusCode, raw)
	}
	return a
}

func (f *fixture) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) payments(t *testing.T, orderID string) int {
	t.Helper()
	return f.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID)
}

func (f *fixture) callbacks(t *testing.T, orderID string) int {
	t.Helper()
	return f.count(t, `SELECT count(*) FROM outbox_events WHERE aggregate_id = $1`, orderID)
}

func TestPayRejectsMalformedInput(t *testing.T) {
	f := setup(t)
	tests := []struct {
		name  string
		body  string
		field string // the message must name it
	}{
		{"malformed JSON", `{"orderId": "O-1", "amount": `, "JSON"},
		{"not an object", `["O-1"]`, "JSON"},
		{"missing orderId", `{"amount":"80.00","currency":"CNY"}`, "orderId"},
		{"empty orderId", `{"orderId":"","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"orderId a number", `{"orderId":1,"amount":"80.00","currency":"CNY"}`, "orderId"},
		// Only an id the order service could have accepted is looked up.
		{"orderId with a space", `{"orderId":"O 1","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"orderId with a slash", `{"orderId":"O/1","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"orderId too long", `{"orderId":"` + strings.Repeat("O", 129) + `","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"missing amount", `{"orderId":"O-1","currency":"CNY"}`, "amount"},
		{"amount a number", `{"orderId":"O-1","amount":80.00,"currency":"CNY"}`, "amount"},
		{"amount null", `{"orderId":"O-1","amount":null,"currency":"CNY"}`, "amount"},
		{"amount three places", `{"orderId":"O-1","amount":"80.001","currency":"CNY"}`, "amount"},
		{"amount negative", `{"orderId":"O-1","amount":"-80.00","currency":"CNY"}`, "amount"},
		{"amount zero", `{"orderId":"O-1","amount":"0","currency":"CNY"}`, "amount"},
		{"amount not decimal", `{"orderId":"O-1","amount":"eighty","currency":"CNY"}`, "amount"},
		{"missing currency", `{"orderId":"O-1","amount":"80.00"}`, "currency"},
		{"currency lower-case", `{"orderId":"O-1","amount":"80.00","currency":"cny"}`, "currency"},
		{"currency too long", `{"orderId":"O-1","amount":"80.00","currency":"CNYY"}`, "currency"},
		// Not worth asking the order service about: bad input is the
		// client's to fix, never "order service unavailable".
		{"orderId of almost 1 MiB", `{"orderId":"` + strings.Repeat("O", httpapi.MaxBodyBytes-100) + `","amount":"80.00","currency":"CNY"}`, "orderId"},
		{"unknown field", `{"orderId":"O-1","amount":"80.00","currency":"CNY","tip":"5.00"}`, `unknown field "tip"`},
		{"trailing bytes", `{"orderId":"O-1","amount":"80.00","currency":"CNY"} {}`, "data after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := f.do(t, http.MethodPost, "/payments", tt.body)
			if a.status != http.StatusBadRequest || a.field("businessCode") != httpapi.CodeInvalidRequest {
				t.Fatalf("answer %d %v, want 400 %s", a.status, a.body, httpapi.CodeInvalidRequest)
			}
			if !strings.Contains(a.field("message"), tt.field) {
				t.Fatalf("message %q does not name %s", a.field("message"), tt.field)
			}
		})
	}
	if n := f.payments(t, "O-1"); n != 0 {
		t.Fatalf("%d payments after malformed requests", n)
	}
	if n := f.callbacks(t, "O-1"); n != 0 {
		t.Fatalf("%d callbacks after malformed requests", n)
	}
	if f.orders.asked != 0 {
		t.Fatalf("the order service was asked %d times about malformed requests", f.orders.asked)
	}
}

func TestPayRejectsOversizeBody(t *testing.T) {
	f := setup(t)
	body := `{"orderId":"O-1","amount":"80.00","currency":"CNY","pad":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`
	a := f.do(t, http.MethodPost, "/payments", body)
	if a.status != http.StatusRequestEntityTooLarge || a.field("businessCode") != httpapi.CodeTooLarge {
		t.Fatalf("answer %d %v, want 413", a.status, a.body)
	}
	if n := f.payments(t, "O-1"); n != 0 {
		t.Fatalf("%d payments after an oversize request", n)
	}
}

func TestPayUnknownOrder(t *testing.T) {
	f := setup(t)
	a := f.do(t, http.MethodPost, "/payments", `{"orderId":"O-404","amount":"80.00","currency":"CNY"}`)
	if a.status != http.StatusNotFound || a.field("businessCode") != ports.CodeOrderNotFound {
		t.Fatalf("answer %d %v, want 404 %s", a.status, a.body, ports.CodeOrderNotFound)
	}
	if n := f.payments(t, "O-404") + f.callbacks(t, "O-404"); n != 0 {
		t.Fatalf("%d rows written for an unknown order", n)
	}
	a = f.do(t, http.MethodGet, "/payments/orders/O-404", "")
	if a.status != http.StatusNotFound || a.field("businessCode") != ports.CodePaymentNotFound {
		t.Fatalf("GET answer %d %v, want 404", a.status, a.body)
	}
}

func TestPayBusinessRejections(t *testing.T) {
	f := setup(t)
	paid := pendingOrder("O-PAID")
	paid.Status = "PAID"
	f.orders.set(paid)
	cancelled := pendingOrder("O-CANCELLED")
	cancelled.Status = "CANCELLED"
	f.orders.set(cancelled)
	tests := []struct {
		name    string
		orderID string
		amount  string
		curr    string
		code    string
	}{
		{"paid elsewhere", "O-PAID", "80.00", "CNY", ports.CodeOrderNotPayable},
		{"cancelled", "O-CANCELLED", "80.00", "CNY", ports.CodeOrderNotPayable},
		{"amount below", "O-1", "79.99", "CNY", ports.CodeAmountMismatch},
		{"amount above", "O-1", "80.01", "CNY", ports.CodeAmountMismatch},
		{"other currency", "O-1", "80.00", "USD", ports.CodeAmountMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"orderId":%q,"amount":%q,"currency":%q}`, tt.orderID, tt.amount, tt.curr)
			a := f.do(t, http.MethodPost, "/payments", body)
			if a.status != http.StatusOK || a.field("businessCode") != tt.code || a.field("message") == "" {
				t.Fatalf("answer %d %v, want 200 %s with a message", a.status, a.body, tt.code)
			}
			if n := f.payments(t, tt.orderID) + f.callbacks(t, tt.orderID); n != 0 {
				t.Fatalf("%d rows written for a rejected payment", n)
			}
		})
	}
}

func TestPayOrderServiceDown(t *testing.T) {
	f := setup(t)
	f.orders.err = errors.New("connection refused")
	a := f.do(t, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`)
	if a.status != http.StatusServiceUnavailable || a.field("businessCode") != ports.CodeOrderLookupFailed {
		t.Fatalf("answer %d %v, want 503", a.status, a.body)
	}
	if got := a.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if n := f.payments(t, "O-1"); n != 0 {
		t.Fatalf("%d payments without an order look-up", n)
	}
}

const payO1 = `{"orderId":"O-1","amount":"80.00","currency":"CNY"}`

func TestPayTwice(t *testing.T) {
	f := setup(t)
	first := f.do(t, http.MethodPost, "/payments", payO1)
	if first.status != http.StatusOK || first.field("businessCode") != httpapi.CodeSuccess ||
		!strings.HasPrefix(first.field("paymentId"), "P-") {
		t.Fatalf("first payment answered %d %v", first.status, first.body)
	}
	second := f.do(t, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"80","currency":"CNY"}`)
	if second.status != http.StatusOK || second.field("businessCode") != httpapi.CodeSuccess ||
		second.field("paymentId") != first.field("paymentId") {
		t.Fatalf("second payment answered %d %v, want SUCCESS %s", second.status, second.body, first.field("paymentId"))
	}
	// Once the callback made the order PAID, a repeat is still a success.
	paid := pendingOrder("O-1")
	paid.Status = "PAID"
	f.orders.set(paid)
	third := f.do(t, http.MethodPost, "/payments", payO1)
	if third.field("businessCode") != httpapi.CodeSuccess || third.field("paymentId") != first.field("paymentId") {
		t.Fatalf("repeat after PAID answered %d %v", third.status, third.body)
	}
	// A repeat for another amount is not the same payment.
	other := f.do(t, http.MethodPost, "/payments", `{"orderId":"O-1","amount":"70.00","currency":"CNY"}`)
	if other.status != http.StatusOK || other.field("businessCode") != ports.CodeAmountMismatch {
		t.Fatalf("repeat with another amount answered %d %v", other.status, other.body)
	}

	if n := f.payments(t, "O-1"); n != 1 {
		t.Fatalf("%d payment rows, want 1", n)
	}
	if n := f.callbacks(t, "O-1"); n != 1 {
		t.Fatalf("%d callback rows, want 1", n)
	}
	var row struct {
		EventID string `db:"event_id"`
		Type    string `db:"event_type"`
		Topic   string `db:"topic"`
		Payload []byte `db:"payload"`
	}
	if err := f.db.Get(&row, `SELECT event_id, event_type, topic, payload FROM outbox_events WHERE aggregate_id = 'O-1'`); err != nil {
		t.Fatal(err)
	}
	var cb event.Callback
	if err := json.Unmarshal(row.Payload, &cb); err != nil {
		t.Fatal(err)
	}
	if row.Type != string(rules.CallbackPaymentSucceeded) || row.Topic != outbox.CallbackTopic || cb.CallbackID != row.EventID ||
		cb.Type != rules.CallbackPaymentSucceeded || cb.OrderID != "O-1" || cb.PaymentID != first.field("paymentId") ||
		(cb.Amount == nil || *cb.Amount != "80.00") || cb.Currency != "CNY" || cb.RefundID != "" || cb.Reason != "" {
		t.Fatalf("callback row %s %s %s", row.Type, row.Topic, row.Payload)
	}

	got := f.do(t, http.MethodGet, "/payments/orders/O-1", "")
	if got.status != http.StatusOK || got.field("orderId") != "O-1" || got.field("paymentId") != first.field("paymentId") ||
		got.field("status") != string(payment.StatusSucceeded) || got.field("amount") != "80.00" || got.field("refunded") != "0.00" {
		t.Fatalf("GET payment answered %d %v", got.status, got.body)
	}

	status := f.do(t, http.MethodGet, "/admin/outbox/"+row.EventID, "")
	if status.status != http.StatusOK || status.field("eventId") != row.EventID || status.field("status") != outbox.StatusPending ||
		status.body["attempts"] != float64(0) {
		t.Fatalf("admin outbox answered %d %v", status.status, status.body)
	}
	if missing := f.do(t, http.MethodGet, "/admin/outbox/E-missing", ""); missing.status != http.StatusNotFound {
		t.Fatalf("admin outbox of an unknown event answered %d %v", missing.status, missing.body)
	}
}

func TestPayConcurrently(t *testing.T) {
	f := setup(t)
	const n = 10
	ids := make([]string, n)
	codes := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(f.url+"/payments", "application/json", strings.NewReader(payO1))
			if err != nil {
				codes[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			var body paymentapi.PayResponse
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				codes[i] = err.Error()
				return
			}
			ids[i], codes[i] = body.PaymentID, body.BusinessCode
		}()
	}
	wg.Wait()
	for i := range n {
		if codes[i] != httpapi.CodeSuccess || ids[i] != ids[0] || ids[0] == "" {
			t.Fatalf("request %d answered %s %s, want SUCCESS %s", i, codes[i], ids[i], ids[0])
		}
	}
	if got := f.payments(t, "O-1"); got != 1 {
		t.Fatalf("%d payment rows, want 1", got)
	}
	if got := f.callbacks(t, "O-1"); got != 1 {
		t.Fatalf("%d callback rows, want 1", got)
	}
}

// blockingOrders holds the look-up of one order until it is answered.
type blockingOrders struct {
	*fakeOrders
	hold   string
	asked  chan struct{}
	answer chan struct{}
}

func (b blockingOrders) Order(ctx context.Context, orderID string) (payment.Order, error) {
	if orderID == b.hold {
		b.asked <- struct{}{}
		<-b.answer
	}
	return b.fakeOrders.Order(ctx, orderID)
}

// TestPayLooksUpOutsideItsSlot admits one payment at a time and holds its
// order look-up: another payment must be served meanwhile, since the
// look-up uses none of the service's database, and the held one too once
// its look-up answers.
func TestPayLooksUpOutsideItsSlot(t *testing.T) {
	f := setup(t)
	f.orders.set(pendingOrder("O-2"))
	orders := blockingOrders{fakeOrders: f.orders, hold: "O-1", asked: make(chan struct{}), answer: make(chan struct{})}
	srv := httpapi.New(httpapi.Config{MapError: ports.MapError, Admission: httpapi.Admission{MaxInFlight: 1}},
		slog.New(slog.DiscardHandler))
	ports.NewHandler(orders, adapters.NewRepository(f.db, nil)).Register(srv.Echo)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	f.url = ts.URL
	var answered sync.Once
	letGo := func() { answered.Do(func() { close(orders.answer) }) }
	t.Cleanup(letGo) // before the server closes, should the test fail

	// Not f.do, which fails the test from this goroutine.
	held := make(chan int, 1)
	go func() {
		resp, err := http.Post(f.url+"/payments", "application/json",
			strings.NewReader(`{"orderId":"O-1","amount":"80.00","currency":"CNY"}`))
		if err != nil {
			t.Error(err)
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	<-orders.asked
	if a := f.do(t, http.MethodPost, "/payments", `{"orderId":"O-2","amount":"80.00","currency":"CNY"}`); a.status != http.StatusOK {
		t.Fatalf("a payment while another waits for its look-up: %d %v, want 200", a.status, a.body)
	}
	letGo()
	if got := <-held; got != http.StatusOK {
		t.Fatalf("the payment whose look-up was held: status %d, want 200", got)
	}
	if f.payments(t, "O-1") != 1 || f.payments(t, "O-2") != 1 {
		t.Fatal("want one payment of each order")
	}
}
