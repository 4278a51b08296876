package ports_test

import (
	"net/http"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
)

// POST /admin/orders/{id}/version raises the order's version without an
// event, with who asked required; bad input is 400, an unknown order 404,
// and the order's next change takes the version after the fence.
func TestFenceVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.paidOrder()
	const path = "/admin/orders/O-1001/version"
	auth := map[string]string{"Authorization": "Bearer " + adminToken, admin.OperatorHeader: "ops-alice"}
	noOperator := map[string]string{"Authorization": "Bearer " + adminToken}
	eventsBefore := e.count(`SELECT count(*) FROM outbox_events WHERE aggregate_id = 'O-1001'`)

	tests := []struct {
		name         string
		path, body   string
		header       map[string]string
		code         int
		businessCode string
	}{
		{"no admin token", path, `{"atLeast":5}`, nil, 401, httpapi.CodeUnauthorized},
		{"no operator", path, `{"atLeast":5}`, noOperator, 400, admin.CodeOperatorRequired},
		{"no atLeast", path, `{}`, auth, 400, httpapi.CodeInvalidRequest},
		{"atLeast zero", path, `{"atLeast":0}`, auth, 400, httpapi.CodeInvalidRequest},
		{"atLeast negative", path, `{"atLeast":-3}`, auth, 400, httpapi.CodeInvalidRequest},
		{"atLeast beyond a JSON integer", path, `{"atLeast":9007199254740992}`, auth, 400, httpapi.CodeInvalidRequest},
		{"atLeast a string", path, `{"atLeast":"5"}`, auth, 400, httpapi.CodeInvalidRequest},
		{"atLeast a fraction", path, `{"atLeast":5.5}`, auth, 400, httpapi.CodeInvalidRequest},
		{"unknown field", path, `{"atLeast":5,"to":6}`, auth, 400, httpapi.CodeInvalidRequest},
		{"unknown order", "/admin/orders/O-404/version", `{"atLeast":5}`, auth, 404, "ORDER_NOT_FOUND"},
	}
	for _, tt := range tests {
		expect(t, e.do(http.MethodPost, tt.path, tt.body, tt.header), tt.code, tt.businessCode)
		if v := e.count(`SELECT version FROM orders WHERE order_id = 'O-1001'`); v != 3 {
			t.Fatalf("%s: the order is at version %d, want 3 (refused, nothing changed)", tt.name, v)
		}
	}

	a := e.do(http.MethodPost, path, `{"atLeast":5}`, auth)
	expect(t, a, 200, "SUCCESS")
	if a.Body["version"] != 5.0 || a.Body["status"] != "PAID" || a.Body["fencedBy"] != "ops-alice" || a.Body["orderId"] != "O-1001" {
		t.Fatalf("fence answered %s; want O-1001 PAID at version 5, fenced by ops-alice", a.Raw)
	}
	// A fence below the version never lowers it; a repeat changes nothing.
	for _, body := range []string{`{"atLeast":2}`, `{"atLeast":5}`} {
		a := e.do(http.MethodPost, path, body, auth)
		expect(t, a, 200, "SUCCESS")
		if a.Body["version"] != 5.0 {
			t.Fatalf("fence %s answered %s; want version 5", body, a.Raw)
		}
	}
	if n := e.count(`SELECT count(*) FROM outbox_events WHERE aggregate_id = 'O-1001'`); n != eventsBefore {
		t.Fatalf("the fence wrote %d outbox rows, want none", n-eventsBefore)
	}
	// Keyed like every POST: the retry is the first answer again.
	keyed := map[string]string{"Authorization": "Bearer " + adminToken, admin.OperatorHeader: "ops-bob", idempotency.Header: "fence-1"}
	first := e.do(http.MethodPost, path, `{"atLeast":6}`, keyed)
	expect(t, first, 200, "SUCCESS")
	if again := e.do(http.MethodPost, path, `{"atLeast":6}`, keyed); again.Raw != first.Raw {
		t.Fatalf("keyed retry answered %s, want %s", again.Raw, first.Raw)
	}

	expect(t, e.post("/orders/O-1001/refunds", `{"amount":"10.00"}`), 200, "SUCCESS")
	var version int64
	if err := e.db.Get(&version, `SELECT aggregate_version FROM outbox_events WHERE aggregate_id = 'O-1001' AND event_type = 'OrderRefundRequested'`); err != nil {
		t.Fatal(err)
	}
	if version != 7 {
		t.Fatalf("the refund after a fence at 6 is version %d, want 7", version)
	}
}
