package ports_test

import (
	"context"
	"encoding/json"
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
	"github.com/reliable-orders/fulfillment/services/notification/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/notification/internal/app"
	"github.com/reliable-orders/fulfillment/services/notification/internal/ports"
)

const (
	adminToken   = "test-admin-token"
	consumerName = "notification-service"
)

type fixture struct {
	t    *testing.T
	db   *sqlx.DB
	repo *adapters.Repository
	proc *inbox.Processor
	dead *dlq.Store
	url  string
}

// setup serves the notification API with its admin group wired as run.go
// wires it, behind an admin token, over a database with the service's
// tables; proc applies events as the consumer does.
func setup(t *testing.T) *fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), dlq.Schema(),
		postgres.MigrationSet{Name: "notification", FS: os.DirFS("../../migrations")})
	fp, err := failpoint.Parse("")
	if err != nil {
		t.Fatal(err)
	}
	repo := adapters.NewRepository(db)
	c := app.NewConsumer(app.DBSink(repo, slog.New(slog.DiscardHandler)), fp, slog.New(slog.DiscardHandler))
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
	items := []event.Item{{SKU: "SKU-1", Quantity: 1}}
	paid := f.envelope(event.OrderPaid, "O-1", 3, event.OrderPaidData{PaymentID: "P-1", PaidAmount: money("80.00"),
		Currency: "CNY", CustomerID: "C-1", Items: items})
	rejected := f.envelope(event.OrderRefundRejected, "O-1", 5, event.OrderRefundRejectedData{RefundID: "R-1",
		Amount: money("500.00"), Currency: "CNY", CustomerID: "C-1", Reason: "REFUND_EXCEEDS_PAYMENT"})
	refunded := f.envelope(event.OrderRefunded, "O-1", 7, event.OrderRefundedData{RefundID: "R-2", PaymentID: "P-1",
		RefundedAmount: money("80.00"), TotalRefundedAmount: money("80.00"), Currency: "CNY", CustomerID: "C-1",
		Items: items, TotalReturnedItems: items})
	returned := f.envelope(event.OrderPaymentReturned, "O-2", 4, event.OrderPaymentReturnedData{PaymentID: "P-9", RefundID: "R-9",
		Amount: money("80.00"), Currency: "CNY", CustomerID: "C-2"})
	for _, env := range []event.Envelope{paid, rejected, refunded, returned} {
		f.process(env, versionguard.Applied)
	}
	gap := f.envelope(event.OrderRefunded, "O-3", 5, event.OrderRefundedData{RefundID: "R-3", PaymentID: "P-3",
		RefundedAmount: money("1.00"), TotalRefundedAmount: money("1.00"), Currency: "CNY", CustomerID: "C-1",
		Items: []event.Item{}, TotalReturnedItems: []event.Item{}})
	f.process(gap, versionguard.WaitingForGap)
	deadID := f.deadLetter(gap)

	code, raw := f.call(`{"orderIds":["O-1","O-2","O-3","O-404"]}`, adminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	sent := func(env event.Envelope, kind string) map[string]any {
		return map[string]any{"eventId": env.EventID, "kind": kind,
			"createdAt": f.stamp(`SELECT created_at FROM notifications WHERE event_id = $1`, env.EventID)}
	}
	none := map[string]any{"version": 0.0, "state": "NONE"}
	want := map[string]any{"orders": []any{
		map[string]any{"orderId": "O-1",
			"notifications": []any{sent(paid, "ORDER_PAID"), sent(rejected, "REFUND_REJECTED"), sent(refunded, "ORDER_REFUNDED")},
			"consumer":      map[string]any{"version": 7.0, "state": "REFUNDED_NOTIFIED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-2", "notifications": []any{sent(returned, "PAYMENT_RETURNED")},
			"consumer": map[string]any{"version": 4.0, "state": "RETURN_NOTIFIED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-3", "notifications": []any{}, "consumer": none,
			"deadLetters": []any{map[string]any{"id": float64(deadID), "eventId": gap.EventID,
				"eventType": "OrderRefunded", "errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, deadID), "replayedBefore": false}}},
		map[string]any{"orderId": "O-404", "notifications": []any{}, "consumer": none, "deadLetters": []any{}},
	}}
	var got any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", raw, want)
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
