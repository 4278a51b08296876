package ports_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/points/internal/app"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
)

const (
	adminToken   = "test-admin-token"
	consumerName = "points-service"
)

type fixture struct {
	t    *testing.T
	db   *sqlx.DB
	repo *adapters.Repository
	proc *inbox.Processor
	dead *dlq.Store
	url  string
}

// setup serves the points API with its admin group wired as run.go
// wires it, behind an admin token, over a database with the service's
// tables; proc applies events as the consumer does.
func setup(t *testing.T) *fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), dlq.Schema(),
		postgres.MigrationSet{Name: "points", FS: os.DirFS("../../migrations")})
	fp, err := failpoint.Parse("")
	if err != nil {
		t.Fatal(err)
	}
	repo := adapters.NewRepository(db, consumerName)
	c := app.NewConsumer(repo, fp, slog.New(slog.DiscardHandler))
	srv := httpapi.New(httpapi.Config{AdminToken: adminToken}, slog.New(slog.DiscardHandler))
	ports.Register(srv.Echo, repo)
	ports.RegisterReconciliation(srv.Admin(), repo, admin.NewFactsReader(db, consumerName))
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return &fixture{t: t, db: db, repo: repo, dead: dlq.NewStore(db), url: ts.URL,
		proc: inbox.NewProcessor(db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))}
}

func (f *fixture) call(body, token string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+"/admin/reconciliation/orders", strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(raw))
}

func (f *fixture) process(env event.Envelope, want versionguard.Outcome) {
	f.t.Helper()
	if got, err := f.proc.Process(context.Background(), env); err != nil || got != want {
		f.t.Fatalf("process %s v%d of %s: %s, %v; want %s", env.EventType, env.AggregateVersion, env.AggregateID, got, err, want)
	}
}

func (f *fixture) envelope(typ event.Type, orderID string, version int64, data any) event.Envelope {
	f.t.Helper()
	env, err := event.New(typ, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "order-service"}, data)
	if err != nil {
		f.t.Fatal(err)
	}
	return env
}

func (f *fixture) deadLetter(env event.Envelope) int64 {
	f.t.Helper()
	id, err := f.dead.Add(context.Background(), dlq.Record{Consumer: consumerName, EventID: env.EventID, AggregateID: env.AggregateID,
		EventType: string(env.EventType), OriginalTopic: "order-events", Value: []byte("{}"),
		FailureReason: "WAITING_FOR_GAP: versions 3-4 missing", ErrorClass: "PERMANENT", Attempts: 1, FirstFailedAt: time.Now()})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

func (f *fixture) stamp(query string, args ...any) string {
	f.t.Helper()
	var ts time.Time
	if err := f.db.Get(&ts, query, args...); err != nil {
		f.t.Fatal(err)
	}
	return ts.UTC().Format(time.RFC3339Nano)
}

func money(s string) event.Money {
	m, err := event.ParseMoney(s)
	if err != nil {
		panic(err) // only literal amounts are passed
	}
	return m
}

func TestReconciliationViews(t *testing.T) {
	f := setup(t)
	paid := func(orderID string) event.Envelope {
		return f.envelope(event.OrderPaid, orderID, 3, event.OrderPaidData{PaymentID: "P-1", PaidAmount: money("80.50"),
			Currency: "CNY", CustomerID: "C-1", Items: []event.Item{{SKU: "SKU-1", Quantity: 1}}})
	}
	refunded := func(orderID string, version int64, amount, total string) event.Envelope {
		return f.envelope(event.OrderRefunded, orderID, version, event.OrderRefundedData{RefundID: fmt.Sprintf("R-%d", version),
			PaymentID: "P-1", RefundedAmount: money(amount), TotalRefundedAmount: money(total), Currency: "CNY", CustomerID: "C-1",
			Items: []event.Item{}, TotalReturnedItems: []event.Item{}})
	}
	earn := paid("O-1")
	first := refunded("O-1", 5, "0.60", "0.60") // worth floor(79.90) = 79: reverses 1
	second := refunded("O-1", 7, "10.00", "10.60")
	f.process(earn, versionguard.Applied)
	f.process(first, versionguard.Applied)
	f.process(second, versionguard.Applied)
	gap := refunded("O-3", 5, "1.00", "1.00")
	f.process(gap, versionguard.WaitingForGap)
	replayed := f.deadLetter(gap) // an earlier dead letter of the same event, replayed
	if _, err := f.dead.Replay(context.Background(), replayed, "test",
		func(context.Context, string, []byte, []byte, map[string]string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	deadID := f.deadLetter(gap) // and dead-lettered again

	code, raw := f.call(`{"orderIds":["O-404","O-1","O-3"]}`, adminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	entry := func(env event.Envelope, typ string, points float64, amount string) map[string]any {
		return map[string]any{"eventId": env.EventID, "type": typ, "points": points, "amount": amount,
			"createdAt": f.stamp(`SELECT created_at FROM points_ledger WHERE event_id = $1`, env.EventID)}
	}
	none := map[string]any{"version": 0.0, "state": "NONE"}
	want := map[string]any{"orders": []any{
		map[string]any{"orderId": "O-404", "entries": []any{}, "consumer": none, "deadLetters": []any{}},
		map[string]any{"orderId": "O-1",
			"entries":  []any{entry(earn, "EARN", 80, "80.50"), entry(first, "REVERSAL", -1, "0.60"), entry(second, "REVERSAL", -10, "10.00")},
			"consumer": map[string]any{"version": 7.0, "state": "PARTIALLY_REVERSED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-3", "entries": []any{}, "consumer": none,
			"deadLetters": []any{map[string]any{"id": float64(deadID), "eventId": gap.EventID,
				"eventType": "OrderRefunded", "errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, deadID), "replayedBefore": true}}},
	}}
	var got any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", raw, want)
	}
	// points is a JSON integer, whatever its size.
	if !strings.Contains(raw, `"points":80,`) {
		t.Fatalf("points not an integer: %s", raw)
	}
	f.process(f.envelope(event.OrderPaid, "O-big", 3, event.OrderPaidData{PaymentID: "P-2", PaidAmount: money("9999999999999999.99"),
		Currency: "CNY", CustomerID: "C-1", Items: []event.Item{{SKU: "SKU-1", Quantity: 1}}}), versionguard.Applied)
	if code, raw := f.call(`{"orderIds":["O-big"]}`, adminToken); code != 200 || !strings.Contains(raw, `"points":9999999999999999,"amount":"9999999999999999.99"`) {
		t.Fatalf("the largest order: %d %s", code, raw)
	}
}

func TestReconciliationRefusesBadRequests(t *testing.T) {
	f := setup(t)
	for body, field := range map[string]string{
		`{"orderIds":[]}`:            "orderIds must hold",
		`{"orderIds":["O-1",""]}`:    "orderIds[1] is required",
		`{"orderIds":["O-1","O 2"]}`: "orderIds[1] must be",
		`{"orderIds":`:               "malformed JSON",
	} {
		code, raw := f.call(body, adminToken)
		var e httpapi.ErrorBody
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatal(err)
		}
		if code != 400 || e.BusinessCode != httpapi.CodeInvalidRequest || !strings.HasPrefix(e.Message, field) {
			t.Fatalf("%s: %d %s, want 400 naming %s", body, code, raw, field)
		}
	}
	if code, raw := f.call(`{"orderIds":["O-1"]}`, ""); code != 401 {
		t.Fatalf("without the token: %d %s", code, raw)
	}
	if code, raw := f.call(`{"orderIds":["O-1"]}`, "wrong"); code != 401 {
		t.Fatalf("with a wrong token: %d %s", code, raw)
	}
}
