package ports_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/outboxtest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
	"github.com/reliable-orders/fulfillment/services/payment/internal/ports"
)

const consumerName = "payment-service"

// adminFixture is the payment service's HTTP API with its admin group
// wired as run.go wires it, behind the admin token, over a database with
// every table the service has; its Proc applies events as the refund
// consumer does.
type adminFixture struct {
	*consumertest.Fixture
	*fixture
}

func setupAdmin(t *testing.T) *adminFixture {
	t.Helper()
	orders := &fakeOrders{orders: map[string]payment.Order{}}
	f := &adminFixture{}
	f.Fixture = consumertest.Serve(t, consumertest.Wiring{Consumer: consumerName, FailPoint: app.FailPoint, MapError: ports.MapError,
		Migrations: []postgres.MigrationSet{outbox.Schema(), {Name: "payment", FS: os.DirFS("../../migrations")}},
		Wire: func(p consumertest.Parts) service.Events {
			repo := adapters.NewRepository(p.DB, nil)
			ports.NewHandler(orders, repo).Register(p.HTTP.Echo)
			admin.RegisterOutbox(p.Admin, p.DB)
			ports.RegisterReconciliation(p.Admin, repo, p.Facts)
			refunds := app.NewRefunds(repo)
			ports.RegisterRefunds(p.Admin, refunds, orders)
			c := app.NewConsumer(refunds, p.FailPoints, p.Logger)
			return service.Events{Transitions: c.Transitions(), Apply: c.Apply}
		}})
	f.fixture = &fixture{db: f.DB, orders: orders, url: f.URL}
	return f
}

// operator names who sends the admin requests.
var operator = http.Header{"X-Operator": {"ops@example"}}

// call sends an admin request as the operator, with the token (or
// without, when token is empty), and returns the status and the answer.
func (f *adminFixture) call(method, path, body, token string) (int, string) {
	f.T.Helper()
	return f.Do(method, path, body, token, operator)
}

// pay makes the payment of a PENDING_PAYMENT order through POST /payments.
func (f *adminFixture) pay(t *testing.T, orderID string) string {
	t.Helper()
	f.orders.set(pendingOrder(orderID))
	a := f.do(t, http.MethodPost, "/payments", fmt.Sprintf(`{"orderId":%q,"amount":"80.00","currency":"CNY"}`, orderID))
	if a.status != 200 || a.field("businessCode") != httpapi.CodeSuccess {
		t.Fatalf("pay %s: %d %v", orderID, a.status, a.body)
	}
	return a.field("paymentId")
}

func TestReconciliationViews(t *testing.T) {
	f := setupAdmin(t)
	paymentID := f.pay(t, "O-1")
	outboxtest.RelayAll(t, f.DB) // the PAYMENT_SUCCEEDED callback is delivered
	f.Process(consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", paymentID, "30.00"), versionguard.Applied)
	f.Process(consumertest.OrderRefundRequested(t, "O-1", 6, "R-2", paymentID, "60.00"), versionguard.Applied) // more than is left
	f.Process(consumertest.OrderRefundRequested(t, "O-2", 4, "R-3", "P-elsewhere", "10.00"), versionguard.Applied)
	dead := consumertest.OrderRefundRequested(t, "O-1", 8, "R-4", paymentID, "1.00")
	if _, err := f.Dead.Replay(context.Background(), f.DeadLetter(dead), "test",
		func(context.Context, string, []byte, []byte, map[string]string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	again := f.DeadLetter(dead) // replayed, and it came back

	code, raw := f.call(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-1","O-404","O-2"]}`, consumertest.AdminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	refundAt := func(refundID string) string {
		return f.Stamp(`SELECT created_at FROM refunds WHERE refund_id = $1`, refundID)
	}
	want := map[string]any{"orders": []any{
		map[string]any{
			"orderId": "O-1",
			"payment": map[string]any{"paymentId": paymentID, "amount": "80.00", "currency": "CNY", "status": "PARTIALLY_REFUNDED",
				"refunded": "30.00", "createdAt": f.Stamp(`SELECT created_at FROM payments WHERE order_id = 'O-1'`),
				"updatedAt": f.Stamp(`SELECT updated_at FROM payments WHERE order_id = 'O-1'`)},
			"refunds": []any{
				map[string]any{"refundId": "R-1", "amount": "30.00", "currency": "CNY", "status": "SUCCEEDED", "reason": "", "createdAt": refundAt("R-1")},
				map[string]any{"refundId": "R-2", "amount": "60.00", "currency": "CNY", "status": "REJECTED", "reason": "REFUND_EXCEEDS_PAYMENT", "createdAt": refundAt("R-2")},
			},
			"outbox":   outboxtest.Shown(outboxtest.Rows(t, f.DB, "O-1")),
			"consumer": map[string]any{"version": 6.0, "state": app.StateRefundHandled},
			"deadLetters": []any{map[string]any{"id": float64(again), "eventId": dead.EventID, "eventType": "OrderRefundRequested",
				"errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.Stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, again), "replayedBefore": true}},
		},
		map[string]any{"orderId": "O-404", "payment": nil, "refunds": []any{}, "outbox": []any{},
			"consumer": map[string]any{"version": 0.0, "state": "NONE"}, "deadLetters": []any{}},
		map[string]any{
			"orderId": "O-2", "payment": nil,
			"refunds": []any{map[string]any{"refundId": "R-3", "amount": "10.00", "currency": "CNY", "status": "REJECTED",
				"reason": "NO_PAYMENT", "createdAt": refundAt("R-3")}},
			"outbox":      outboxtest.Shown(outboxtest.Rows(t, f.DB, "O-2")),
			"consumer":    map[string]any{"version": 4.0, "state": app.StateRefundHandled},
			"deadLetters": []any{},
		},
	}}
	var got any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", raw, want)
	}
	// The callbacks: the payment's delivered, the refunds' waiting.
	var summary []string
	for _, e := range want["orders"].([]any)[0].(map[string]any)["outbox"].([]any) {
		m := e.(map[string]any)
		summary = append(summary, fmt.Sprintf("%s %s %t", m["eventType"], m["status"], m["sentAt"] != nil))
	}
	if fmt.Sprint(summary) != "[PAYMENT_SUCCEEDED SENT true REFUND_SUCCEEDED PENDING false REFUND_REJECTED PENDING false]" {
		t.Fatalf("O-1 callbacks %v", summary)
	}
	// The orders the service holds a payment for, a page at a time.
	f.pay(t, "O-0")
	f.ExpectEffects("O-0", "O-1")
}

func TestReconciliationRefusesBadRequests(t *testing.T) {
	setupAdmin(t).ExpectRefusals()
}

// refundState is what a refund changed: the ledger, the payment and the
// callbacks.
type refundState struct {
	ledger    []string
	refunded  string
	status    string
	callbacks []string
}

func (f *adminFixture) refundState(t *testing.T, orderID string) refundState {
	t.Helper()
	var s refundState
	var ledger []struct {
		RefundID  string  `db:"refund_id"`
		Amount    string  `db:"amount"`
		Status    string  `db:"status"`
		Reason    *string `db:"reason"`
		Requested string  `db:"requested_reason"`
	}
	if err := f.db.Select(&ledger, `SELECT refund_id, amount::numeric(18,2)::text AS amount, status, reason, requested_reason
		FROM refunds WHERE order_id = $1 ORDER BY created_at, refund_id`, orderID); err != nil {
		t.Fatal(err)
	}
	for _, l := range ledger {
		reason := ""
		if l.Reason != nil {
			reason = *l.Reason
		}
		s.ledger = append(s.ledger, fmt.Sprintf("%s %s %s %s %s", l.RefundID, l.Amount, l.Status, reason, l.Requested))
	}
	var p struct {
		Refunded string `db:"refunded"`
		Status   string `db:"status"`
	}
	if err := f.db.Get(&p, `SELECT refunded::text AS refunded, status FROM payments WHERE order_id = $1`, orderID); err == nil {
		s.refunded, s.status = p.Refunded, p.Status
	}
	var rows []struct {
		Version int64  `db:"aggregate_version"`
		Payload []byte `db:"payload"`
	}
	if err := f.db.Select(&rows, `SELECT aggregate_version, payload FROM outbox_events WHERE aggregate_id = $1 AND event_type <> $2 ORDER BY id`,
		orderID, string(rules.CallbackPaymentSucceeded)); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var cb event.Callback
		if err := json.Unmarshal(r.Payload, &cb); err != nil {
			t.Fatal(err)
		}
		s.callbacks = append(s.callbacks, fmt.Sprintf("%s %s %s %s %s %s v%d", cb.Type, cb.RefundID, cb.PaymentID, *cb.Amount, cb.Currency, cb.Reason, r.Version))
	}
	return s
}

func TestOperatorRefunds(t *testing.T) {
	f := setupAdmin(t)
	paymentID := f.pay(t, "O-1")
	f.Process(consumertest.OrderRefundRequested(t, "O-1", 4, "R-1", paymentID, "30.00"), versionguard.Applied) // 50.00 left
	const reason = "PAYMENT_FOR_UNPAYABLE_ORDER"
	refund := func(orderID, refundID, amount string) (int, string) {
		return f.call(http.MethodPost, "/admin/payments/orders/"+orderID+"/refunds",
			fmt.Sprintf(`{"refundId":%q,"amount":%q,"reason":%q}`, refundID, amount, reason), consumertest.AdminToken)
	}
	answer := func(refundID, status, rejection string) string {
		return fmt.Sprintf(`{"businessCode":"SUCCESS","refundId":%q,"status":%q,"reason":%q}`, refundID, status, rejection)
	}

	code, raw := refund("O-1", "R-op-1", "10.00")
	if code != 200 || raw != answer("R-op-1", "SUCCEEDED", "") {
		t.Fatalf("refund: %d %s", code, raw)
	}
	after := f.refundState(t, "O-1")
	want := refundState{
		ledger:   []string{"R-1 30.00 SUCCEEDED  ", "R-op-1 10.00 SUCCEEDED  " + reason},
		refunded: "40.00", status: "PARTIALLY_REFUNDED",
		callbacks: []string{"REFUND_SUCCEEDED R-1 " + paymentID + " 30.00 CNY  v4", "REFUND_SUCCEEDED R-op-1 " + paymentID + " 10.00 CNY  v0"},
	}
	if !reflect.DeepEqual(after, want) {
		t.Fatalf("after the refund\n got %+v\nwant %+v", after, want)
	}

	// A repeat answers the recorded outcome and writes nothing, even with
	// another amount.
	for _, amount := range []string{"10.00", "20.00"} {
		code, raw = refund("O-1", "R-op-1", amount)
		if code != 200 || raw != answer("R-op-1", "SUCCEEDED", "") {
			t.Fatalf("repeat: %d %s", code, raw)
		}
		if again := f.refundState(t, "O-1"); !reflect.DeepEqual(again, want) {
			t.Fatalf("a repeat changed\n%+v\nto\n%+v", want, again)
		}
	}

	// More than is left (40.00) is a rejection: recorded and reported, the
	// payment untouched.
	code, raw = refund("O-1", "R-op-2", "40.01")
	if code != 200 || raw != answer("R-op-2", "REJECTED", payment.ReasonRefundExceedsPayment) {
		t.Fatalf("refund above what is left: %d %s", code, raw)
	}
	want.ledger = append(want.ledger, "R-op-2 40.01 REJECTED "+payment.ReasonRefundExceedsPayment+" "+reason)
	want.callbacks = append(want.callbacks, "REFUND_REJECTED R-op-2 "+paymentID+" 40.01 CNY "+payment.ReasonRefundExceedsPayment+" v0")
	if got := f.refundState(t, "O-1"); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the rejection\n got %+v\nwant %+v", got, want)
	}

	// What is left, exactly, refunds the payment in full.
	code, raw = refund("O-1", "R-op-3", "40")
	if code != 200 || raw != answer("R-op-3", "SUCCEEDED", "") {
		t.Fatalf("the rest: %d %s", code, raw)
	}
	if got := f.refundState(t, "O-1"); got.refunded != "80.00" || got.status != "REFUNDED" || len(got.callbacks) != 4 {
		t.Fatalf("after the rest %+v", got)
	}

	// An order without a payment: a recorded rejection, and no callback
	// the order service could not read.
	code, raw = refund("O-none", "R-op-4", "10.00")
	if code != 200 || raw != answer("R-op-4", "REJECTED", payment.ReasonNoPayment) {
		t.Fatalf("no payment: %d %s", code, raw)
	}
	if got := f.refundState(t, "O-none"); fmt.Sprint(got.ledger) != "[R-op-4 10.00 REJECTED NO_PAYMENT "+reason+"]" || len(got.callbacks) != 0 {
		t.Fatalf("no payment: %+v", got)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox_events WHERE aggregate_id = 'O-none'`); n != 0 {
		t.Fatalf("%d outbox rows for an order without a payment, want 0", n)
	}
	code, raw = refund("O-none", "R-op-4", "10.00")
	if code != 200 || raw != answer("R-op-4", "REJECTED", payment.ReasonNoPayment) {
		t.Fatalf("no payment, repeated: %d %s", code, raw)
	}
}

// TestOperatorRefundOfAPaymentTheOrderHoldsIsTheOrders: the order holds the
// payment, so an operator's refund is forwarded to the order service with
// the operator, the amount, the goods and the reason, and answered
// REQUESTED: nothing moves here until the order's OrderRefundRequested
// arrives. Without X-Operator it is refused and nothing is forwarded.
func TestOperatorRefundOfAPaymentTheOrderHoldsIsTheOrders(t *testing.T) {
	f := setupAdmin(t)
	paymentID := f.pay(t, "O-1")
	held := pendingOrder("O-1")
	held.Status, held.PaymentID = "PAID", paymentID
	f.orders.set(held)

	code, raw := f.call(http.MethodPost, "/admin/payments/orders/O-1/refunds",
		`{"refundId":"R-op-1","amount":"10.00","items":[{"sku":"SKU-1","quantity":1}],"reason":"damaged in transit"}`, consumertest.AdminToken)
	if code != 200 || raw != `{"businessCode":"SUCCESS","refundId":"R-op-1","status":"REQUESTED","reason":"","orderStatus":"REFUNDING"}` {
		t.Fatalf("refund: %d %s", code, raw)
	}
	if len(f.orders.refunds) != 1 {
		t.Fatalf("%d refunds forwarded, want 1", len(f.orders.refunds))
	}
	got := f.orders.refunds[0]
	if got.orderID != "O-1" || got.refund.RefundID != "R-op-1" || got.refund.Amount == nil || *got.refund.Amount != "10.00" ||
		string(got.refund.Items) != `[{"sku":"SKU-1","quantity":1}]` || got.refund.Reason != "damaged in transit" || got.refund.Operator != "ops@example" {
		t.Fatalf("forwarded %+v", got)
	}
	if s := f.refundState(t, "O-1"); len(s.ledger) != 0 || s.refunded != "0.00" {
		t.Fatalf("the payment service refunded by itself: %+v", s)
	}

	code, raw = f.Do(http.MethodPost, "/admin/payments/orders/O-1/refunds", `{"refundId":"R-op-2","amount":"10.00","reason":"x"}`,
		consumertest.AdminToken, nil)
	if code != 400 || len(f.orders.refunds) != 1 {
		t.Fatalf("without X-Operator: %d %s, %d forwarded", code, raw, len(f.orders.refunds))
	}
}

func TestOperatorRefundsRefuseBadRequests(t *testing.T) {
	f := setupAdmin(t)
	f.pay(t, "O-1")
	tests := []struct {
		name, orderID, body, field string
	}{
		{"bad order id", "O!1", `{"refundId":"R-1","amount":"1.00","reason":"x"}`, "orderId"},
		{"no refund id", "O-1", `{"amount":"1.00","reason":"x"}`, "refundId"},
		{"bad refund id", "O-1", `{"refundId":"R 1","amount":"1.00","reason":"x"}`, "refundId"},
		{"no amount", "O-1", `{"refundId":"R-1","reason":"x"}`, "amount"},
		{"zero amount", "O-1", `{"refundId":"R-1","amount":"0.00","reason":"x"}`, "amount"},
		{"three places", "O-1", `{"refundId":"R-1","amount":"1.001","reason":"x"}`, "amount"},
		{"a number", "O-1", `{"refundId":"R-1","amount":1,"reason":"x"}`, "amount"},
		{"reason too long", "O-1", `{"refundId":"R-1","amount":"1.00","reason":"` + strings.Repeat("x", 501) + `"}`, "reason"},
		{"malformed JSON", "O-1", `{"refundId":`, "malformed JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, raw := f.call(http.MethodPost, "/admin/payments/orders/"+tt.orderID+"/refunds", tt.body, consumertest.AdminToken)
			var body httpapi.ErrorBody
			if err := json.Unmarshal([]byte(raw), &body); err != nil {
				t.Fatal(err)
			}
			if code != 400 || body.BusinessCode != httpapi.CodeInvalidRequest || !strings.HasPrefix(body.Message, tt.field) {
				t.Fatalf("%d %s, want 400 naming %s", code, raw, tt.field)
			}
		})
	}
	if n := f.count(t, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds recorded from bad requests", n)
	}
	for _, path := range []string{"/admin/reconciliation/orders", "/admin/payments/orders/O-1/refunds", "/admin/outbox/E-1/republish"} {
		if code, raw := f.call(http.MethodPost, path, `{"orderIds":["O-1"],"refundId":"R-1","amount":"1.00"}`, ""); code != 401 {
			t.Fatalf("%s without the token: %d %s", path, code, raw)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM refunds`); n != 0 {
		t.Fatalf("%d refunds recorded without the token", n)
	}
}

func TestRepublishCallback(t *testing.T) {
	f := setupAdmin(t)
	f.pay(t, "O-1")
	outboxtest.RelayAll(t, f.DB)
	var eventID string
	if err := f.db.Get(&eventID, `SELECT event_id FROM outbox_events WHERE aggregate_id = 'O-1'`); err != nil {
		t.Fatal(err)
	}
	code, raw := f.call(http.MethodPost, "/admin/outbox/"+eventID+"/republish", "", consumertest.AdminToken)
	var s outbox.Status
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatal(err)
	}
	if code != 200 || s.EventID != eventID || s.EventType != string(rules.CallbackPaymentSucceeded) || s.Status != outbox.StatusPending ||
		s.Attempts != 1 || s.SentAt != nil || strings.Contains(raw, "sentAt") {
		t.Fatalf("republish: %d %s", code, raw)
	}
	if _, shown := f.call(http.MethodGet, "/admin/outbox/"+eventID, "", consumertest.AdminToken); shown != raw {
		t.Fatalf("republish answered %s, GET /admin/outbox shows %s", raw, shown)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox_events WHERE status = 'PENDING' AND sent_at IS NULL`); n != 1 {
		t.Fatalf("%d PENDING rows, want 1", n)
	}
	if code, raw := f.call(http.MethodPost, "/admin/outbox/E-404/republish", "", consumertest.AdminToken); code != 404 || !strings.Contains(raw, `"businessCode":"EVENT_NOT_FOUND"`) {
		t.Fatalf("unknown event: %d %s", code, raw)
	}
	if code, raw := f.call(http.MethodPost, "/admin/outbox/E!1/republish", "", consumertest.AdminToken); code != 400 || !strings.Contains(raw, `"message":"eventId must be`) {
		t.Fatalf("bad event id: %d %s", code, raw)
	}
}

// TestConcurrentOperatorRefundsApplyOnce sends one refund id many times at
// once, for an order with a payment (the payment's row lock serializes
// them) and one without (the ledger's key does): one entry, one answer.
func TestConcurrentOperatorRefundsApplyOnce(t *testing.T) {
	f := setupAdmin(t)
	f.pay(t, "O-1")
	for _, c := range []struct{ orderID, want string }{
		{"O-1", `{"businessCode":"SUCCESS","refundId":"R-race-O-1","status":"SUCCEEDED","reason":""}`},
		{"O-none", `{"businessCode":"SUCCESS","refundId":"R-race-O-none","status":"REJECTED","reason":"NO_PAYMENT"}`},
	} {
		const n = 8
		answers := make(chan string, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, raw := f.call(http.MethodPost, "/admin/payments/orders/"+c.orderID+"/refunds",
					`{"refundId":"R-race-`+c.orderID+`","amount":"10.00","reason":"PAYMENT_FOR_UNPAYABLE_ORDER"}`, consumertest.AdminToken)
				answers <- fmt.Sprintf("%d %s", code, raw)
			}()
		}
		wg.Wait()
		close(answers)
		for a := range answers {
			if a != "200 "+c.want {
				t.Fatalf("%s: answered %s, want 200 %s", c.orderID, a, c.want)
			}
		}
		if n := f.count(t, `SELECT count(*) FROM refunds WHERE order_id = $1`, c.orderID); n != 1 {
			t.Fatalf("%s: %d ledger entries, want 1", c.orderID, n)
		}
	}
	if got := f.refundState(t, "O-1"); got.refunded != "10.00" || len(got.callbacks) != 1 {
		t.Fatalf("O-1 after the race: %+v", got)
	}
}
