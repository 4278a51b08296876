package ports_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/outboxtest"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
)

var auth = map[string]string{"Authorization": "Bearer " + adminToken, "X-Operator": "ops"}

func (e *env) admin(method, path, body string) answer {
	e.t.Helper()
	return e.do(method, path, body, auth)
}

// storedTimes returns created_at and updated_at of an order.
func (e *env) storedTimes(orderID string) (string, string) {
	e.t.Helper()
	var row struct {
		CreatedAt time.Time `db:"created_at"`
		UpdatedAt time.Time `db:"updated_at"`
	}
	if err := e.db.Get(&row, `SELECT created_at, updated_at FROM orders WHERE order_id = $1`, orderID); err != nil {
		e.t.Fatal(err)
	}
	return outboxtest.Stamp(row.CreatedAt), outboxtest.Stamp(row.UpdatedAt)
}

// storedEvents returns the outbox rows of an order as the view must show
// them, and their statuses.
func (e *env) storedEvents(orderID string) ([]any, []string) {
	e.t.Helper()
	rows := outboxtest.Rows(e.t, e.db, orderID)
	var summary []string
	for _, r := range rows {
		summary = append(summary, fmt.Sprintf("%s v%d %s", r.EventType, r.AggregateVersion, r.Status))
	}
	return outboxtest.Shown(rows), summary
}

func decode(t *testing.T, raw string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// partlyRefunded takes O-1001 to PARTIALLY_REFUNDED v5: one of its two
// SKU-1 came back for 40.00. It returns the refund id.
func (e *env) partlyRefunded() string {
	e.t.Helper()
	e.paidOrder()
	a := e.post("/orders/O-1001/refunds", `{"items":[{"sku":"SKU-1","quantity":1}]}`)
	expect(e.t, a, 200, "SUCCESS")
	refundID := a.Body["refundId"].(string)
	expect(e.t, e.callback(refundCallback("E-ref-1", "REFUND_SUCCEEDED", refundID, "40.00", "")), 200, "SUCCESS")
	return refundID
}

func TestReconciliationViews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	refundID := e.partlyRefunded()
	outboxtest.RelayAll(t, e.db) // O-1001's rows are SENT, O-2's stays PENDING
	expect(t, e.post("/orders", `{"orderId":"O-2","customerId":"C-2","currency":"USD","items":[{"sku":"A","quantity":1,"unitPrice":"0.01"},{"sku":"B","quantity":3,"unitPrice":"2.50"}]}`), 200, "SUCCESS")

	a := e.admin(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-2","O-404","O-1001"]}`)
	if a.Code != 200 {
		t.Fatalf("%d %s", a.Code, a.Raw)
	}
	created1, updated1 := e.storedTimes("O-1001")
	events1, summary1 := e.storedEvents("O-1001")
	created2, updated2 := e.storedTimes("O-2")
	events2, summary2 := e.storedEvents("O-2")
	if want := []string{"OrderCreated v1 SENT", "OrderCheckedOut v2 SENT", "OrderPaid v3 SENT", "OrderRefundRequested v4 SENT", "OrderRefunded v5 SENT"}; fmt.Sprint(summary1) != fmt.Sprint(want) {
		t.Fatalf("O-1001 rows %v, want %v", summary1, want)
	}
	if want := []string{"OrderCreated v1 PENDING"}; fmt.Sprint(summary2) != fmt.Sprint(want) {
		t.Fatalf("O-2 rows %v, want %v", summary2, want)
	}
	want := map[string]any{"orders": []any{
		map[string]any{
			"orderId": "O-2", "found": true, "status": "CREATED", "version": 1.0, "amount": "7.51", "currency": "USD",
			"customerId": "C-2", "paymentId": "", "refundedAmount": "0.00", "returnedItems": []any{}, "refunds": []any{},
			"items": []any{
				map[string]any{"sku": "A", "quantity": 1.0, "unitPrice": "0.01"},
				map[string]any{"sku": "B", "quantity": 3.0, "unitPrice": "2.50"},
			},
			"createdAt": created2, "updatedAt": updated2, "events": events2,
		},
		map[string]any{"orderId": "O-404", "found": false},
		map[string]any{
			"orderId": "O-1001", "found": true, "status": "PARTIALLY_REFUNDED", "version": 5.0, "amount": "80.00", "currency": "CNY",
			"customerId": "C-1", "paymentId": "P-1", "refundedAmount": "40.00",
			"items":         []any{map[string]any{"sku": "SKU-1", "quantity": 2.0, "unitPrice": "40.00"}},
			"returnedItems": []any{map[string]any{"sku": "SKU-1", "quantity": 1.0}},
			"refunds": []any{map[string]any{"refundId": refundID, "kind": "REFUND", "paymentId": "P-1", "amount": "40.00",
				"currency": "CNY", "items": []any{map[string]any{"sku": "SKU-1", "quantity": 1.0}}, "status": "SUCCEEDED"}},
			"createdAt": created1, "updatedAt": updated1, "events": events1,
		},
	}}
	if got := decode(t, a.Raw); !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", a.Raw, want)
	}
	if !strings.Contains(a.Raw, `{"orderId":"O-404","found":false}`) {
		t.Fatalf("an unknown order must answer orderId and found only: %s", a.Raw)
	}

	// Every requested id has its view, also a repeated one.
	a = e.admin(http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-404","O-404"]}`)
	if a.Code != 200 || strings.TrimSpace(a.Raw) != `{"orders":[{"orderId":"O-404","found":false},{"orderId":"O-404","found":false}]}` {
		t.Fatalf("unknown orders: %d %s", a.Code, a.Raw)
	}
}

// TestUnknownOrders: the order service answers which of the ids it does
// not know, in the request's order, a repeated one as often as asked.
func TestUnknownOrders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	tests := []struct{ name, body, want string }{
		{"known and unknown", `{"orderIds":["O-404","O-1001","O-2","O-404"]}`, `{"orderIds":["O-404","O-2","O-404"]}`},
		{"all known", `{"orderIds":["O-1001"]}`, `{"orderIds":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.admin(http.MethodPost, "/admin/reconciliation/unknown-orders", tt.body)
			if a.Code != 200 || strings.TrimSpace(a.Raw) != tt.want {
				t.Fatalf("%d %s, want 200 %s", a.Code, a.Raw, tt.want)
			}
		})
	}
}

func TestReconciliationViewsRefuseBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, method, path, body, field string
	}{
		{"no ids", http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":[]}`, "orderIds"},
		{"a bad id", http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":["O-1","O 2"]}`, "orderIds[1]"},
		{"malformed JSON", http.MethodPost, "/admin/reconciliation/orders", `{"orderIds":`, "malformed JSON"},
		{"changedAfter not a time", http.MethodGet, "/admin/reconciliation/orders?changedAfter=yesterday", "", "changedAfter"},
		{"changedBefore not a time", http.MethodGet, "/admin/reconciliation/orders?changedBefore=2026-13-01T00:00:00Z", "", "changedBefore"},
		{"afterId breaks the id rule", http.MethodGet, "/admin/reconciliation/orders?afterId=O%201", "", "afterId"},
		{"limit zero", http.MethodGet, "/admin/reconciliation/orders?limit=0", "", "limit"},
		{"limit above 1000", http.MethodGet, "/admin/reconciliation/orders?limit=1001", "", "limit"},
		{"limit not a number", http.MethodGet, "/admin/reconciliation/orders?limit=ten", "", "limit"},
		{"republish a bad event id", http.MethodPost, "/admin/outbox/E!1/republish", "", "eventId"},
		{"unknown orders of no ids", http.MethodPost, "/admin/reconciliation/unknown-orders", `{"orderIds":[]}`, "orderIds"},
		{"unknown orders of a bad id", http.MethodPost, "/admin/reconciliation/unknown-orders", `{"orderIds":["O 1"]}`, "orderIds[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.admin(tt.method, tt.path, tt.body)
			expect(t, a, 400, httpapi.CodeInvalidRequest)
			if msg, _ := a.Body["message"].(string); !strings.HasPrefix(msg, tt.field) {
				t.Fatalf("message %q does not name %s", msg, tt.field)
			}
		})
	}
	for _, path := range []string{"/admin/reconciliation/orders", "/admin/reconciliation/unknown-orders", "/admin/outbox/E-1/republish"} {
		expect(t, e.do(http.MethodPost, path, `{"orderIds":["O-1"]}`, nil), 401, httpapi.CodeUnauthorized)
	}
	expect(t, e.get("/admin/reconciliation/orders"), 401, httpapi.CodeUnauthorized)
}

// page is one answer of GET /admin/reconciliation/orders.
type page orderapi.ChangedViews

func (e *env) page(query url.Values) (page, string) {
	e.t.Helper()
	a := e.admin(http.MethodGet, "/admin/reconciliation/orders?"+query.Encode(), "")
	if a.Code != 200 {
		e.t.Fatalf("GET %s: %d %s", query.Encode(), a.Code, a.Raw)
	}
	var p page
	if err := json.Unmarshal([]byte(a.Raw), &p); err != nil {
		e.t.Fatal(err)
	}
	return p, a.Raw
}

func (p page) ids() []string {
	out := make([]string, len(p.Orders))
	for i, o := range p.Orders {
		out[i] = o.OrderID
	}
	return out
}

func TestChangedOrdersPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"O-c", "O-a", "O-b"} {
		expect(t, e.post("/orders", strings.Replace(orderBody, "O-1001", id, 1)), 200, "SUCCESS")
	}
	expect(t, e.post("/orders/O-c/checkout", ""), 200, "SUCCESS") // O-c changed last
	_, updatedA := e.storedTimes("O-a")
	_, updatedB := e.storedTimes("O-b")
	_, updatedC := e.storedTimes("O-c")

	first, raw := e.page(url.Values{"limit": {"2"}})
	if fmt.Sprint(first.ids()) != "[O-a O-b]" || first.Next == nil || first.Next.ChangedAfter != updatedB || first.Next.AfterID != "O-b" {
		t.Fatalf("first page %s, want O-a, O-b and next = (%s, O-b)", raw, updatedB)
	}
	if outboxtest.Stamp(first.Orders[0].UpdatedAt) != updatedA || !first.Orders[0].Found || first.Orders[0].Status != "CREATED" {
		t.Fatalf("first page's O-a: %s", raw)
	}
	second, raw := e.page(url.Values{"limit": {"2"}, "changedAfter": {first.Next.ChangedAfter}, "afterId": {first.Next.AfterID}})
	if fmt.Sprint(second.ids()) != "[O-c]" || second.Next != nil || second.Orders[0].Status != "PENDING_PAYMENT" || outboxtest.Stamp(second.Orders[0].UpdatedAt) != updatedC {
		t.Fatalf("second page %s, want O-c alone and next null", raw)
	}
	if !strings.Contains(raw, `"next":null`) {
		t.Fatalf("the last page must say next null: %s", raw)
	}

	// A full last page points past itself; the page after it is empty.
	full, raw := e.page(url.Values{"limit": {"3"}})
	if fmt.Sprint(full.ids()) != "[O-a O-b O-c]" || full.Next == nil || full.Next.ChangedAfter != updatedC || full.Next.AfterID != "O-c" {
		t.Fatalf("full page %s", raw)
	}
	empty, raw := e.page(url.Values{"changedAfter": {full.Next.ChangedAfter}, "afterId": {full.Next.AfterID}})
	if strings.TrimSpace(raw) != `{"orders":[],"next":null}` || len(empty.Orders) != 0 {
		t.Fatalf("page after the last: %s", raw)
	}

	// The default limit holds everything here; changedBefore cuts the window.
	all, raw := e.page(url.Values{})
	if fmt.Sprint(all.ids()) != "[O-a O-b O-c]" || all.Next != nil {
		t.Fatalf("default page %s", raw)
	}
	window, raw := e.page(url.Values{"changedBefore": {updatedC}})
	if fmt.Sprint(window.ids()) != "[O-a O-b]" || window.Next != nil {
		t.Fatalf("changedBefore O-c's change: %s", raw)
	}
	// The same instant in another zone is the same cursor.
	ub, err := time.Parse(time.RFC3339Nano, updatedB)
	if err != nil {
		t.Fatal(err)
	}
	shifted, raw := e.page(url.Values{"changedAfter": {ub.In(time.FixedZone("UTC+8", 8*3600)).Format(time.RFC3339Nano)}, "afterId": {"O-b"}})
	if fmt.Sprint(shifted.ids()) != "[O-c]" {
		t.Fatalf("cursor in +08:00: %s", raw)
	}
}

func TestRepublish(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	expect(t, e.post("/orders", orderBody), 200, "SUCCESS")
	outboxtest.RelayAll(t, e.db)
	var eventID string
	if err := e.db.Get(&eventID, `SELECT event_id FROM outbox_events WHERE aggregate_id = 'O-1001'`); err != nil {
		t.Fatal(err)
	}
	if a := e.admin(http.MethodGet, "/admin/outbox/"+eventID, ""); a.Body["status"] != "SENT" || a.Body["sentAt"] == nil {
		t.Fatalf("before: %s", a.Raw)
	}

	a := e.admin(http.MethodPost, "/admin/outbox/"+eventID+"/republish", "")
	if a.Code != 200 || a.Body["eventId"] != eventID || a.Body["eventType"] != "OrderCreated" || a.Body["status"] != "PENDING" ||
		a.Body["attempts"] != 1.0 || a.Body["sentAt"] != nil || a.Body["nextAttemptAt"] == nil {
		t.Fatalf("republish: %d %s", a.Code, a.Raw)
	}
	if shown := e.admin(http.MethodGet, "/admin/outbox/"+eventID, ""); shown.Raw != a.Raw {
		t.Fatalf("republish answered %s, GET /admin/outbox shows %s", a.Raw, shown.Raw)
	}
	if n := e.count(`SELECT count(*) FROM outbox_events WHERE status = 'PENDING' AND sent_at IS NULL AND next_attempt_at <= now()`); n != 1 {
		t.Fatalf("%d due PENDING rows, want 1", n)
	}
	outboxtest.RelayAll(t, e.db)
	if n := e.count(`SELECT count(*) FROM outbox_events WHERE status = 'SENT' AND attempts = 2`); n != 1 {
		t.Fatalf("%d rows sent twice, want 1", n)
	}
	expect(t, e.admin(http.MethodPost, "/admin/outbox/E-404/republish", ""), 404, "EVENT_NOT_FOUND")
}
