// Package consumertest holds what the tests of the consumers of
// order-events share: the conformance suite every consumer built on
// pkg/service passes (Run), builders of the order service's events, and
// for the tests of a reconciliation endpoint a database with the
// consumer's tables, the service's HTTP server behind an admin token, its
// events applied as the consumer applies them, and dead letters written as
// the router writes them (Fixture, which Serve wires as a service's run.go
// wires it).
package consumertest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// AdminToken is the admin token the served admin group asks for.
const AdminToken = "test-admin-token"

// Database creates a database with a consumer's shared tables (dedup rows,
// versions, dead letters) and the service's own migrations (an outbox's
// first, when it has one).
func Database(t *testing.T, service ...postgres.MigrationSet) *sqlx.DB {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, append([]postgres.MigrationSet{inbox.Schema(), versionguard.Schema(), dlq.Schema()}, service...)...)
	return db
}

// Fixture is a consumer service served over its database.
type Fixture struct {
	T        *testing.T
	DB       *sqlx.DB
	Consumer string
	// Proc applies events as the consumer does.
	Proc *inbox.Processor
	Dead *dlq.Store
	URL  string
}

// New serves handler, the service's routes with its admin group, for the
// test's duration, and applies events through guard as consumer.
func New(t *testing.T, db *sqlx.DB, consumer string, handler http.Handler, guard *versionguard.Guard) *Fixture {
	t.Helper()
	ts := httptest.NewServer(handler)
	t.Cleanup(ts.Close)
	return &Fixture{T: t, DB: db, Consumer: consumer, URL: ts.URL,
		Proc: inbox.NewProcessor(db, consumer, guard), Dead: dlq.NewStore(db)}
}

// Wiring is how a consumer service wires itself over its database, as its
// run.go does on pkg/service, for Serve.
type Wiring struct {
	// Consumer is the consumer group ("inventory-service").
	Consumer string
	// FailPoint is the fail point the consumer's apply function fires.
	FailPoint string
	// Migrations are the service's own, run after the consumer's shared
	// tables (an outbox's first, when it has one).
	Migrations []postgres.MigrationSet
	// MapError turns the service's own errors into answers, as
	// service.Options.MapError does; nil means none.
	MapError func(error) *httpapi.Error
	// Wire registers the service's routes, its reconciliation endpoint
	// among them, and returns what the consumer does with the order events.
	Wire func(Parts) service.Events
}

// Parts are what Wire wires the service from, as pkg/service hands them
// to a run.go.
type Parts struct {
	DB         *sqlx.DB
	FailPoints *failpoint.Registry
	HTTP       *httpapi.Server
	// Admin is the admin group, behind AdminToken.
	Admin *echo.Group
	// Facts reads what the consumer knows of orders, for its
	// reconciliation view.
	Facts  *admin.FactsReader
	Logger *slog.Logger
}

// FailPoints is a registry of the fail points names, all disarmed.
func FailPoints(t testing.TB, names ...string) *failpoint.Registry {
	t.Helper()
	fp, err := failpoint.New(failpoint.Config{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// Apply applies env through proc and returns the outcome, failing the
// test on an error.
func Apply(t testing.TB, proc *inbox.Processor, env event.Envelope) versionguard.Outcome {
	t.Helper()
	out, err := proc.Process(context.Background(), env)
	if err != nil {
		t.Fatalf("process %s v%d of %s: %v", env.EventType, env.AggregateVersion, env.AggregateID, err)
	}
	return out
}

// Process applies env through proc and fails the test unless its outcome
// is want.
func Process(t testing.TB, proc *inbox.Processor, env event.Envelope, want versionguard.Outcome) {
	t.Helper()
	if got := Apply(t, proc, env); got != want {
		t.Fatalf("process %s v%d of %s: %s, want %s", env.EventType, env.AggregateVersion, env.AggregateID, got, want)
	}
}

// Serve is New for the service w wires: a database with the consumer's
// tables and w's migrations, a fail-point registry holding w's fail point
// (disarmed), the service's HTTP server behind AdminToken, and events
// applied through the version guard as pkg/service builds it.
func Serve(t *testing.T, w Wiring) *Fixture {
	t.Helper()
	db := Database(t, w.Migrations...)
	fp := FailPoints(t, w.FailPoint)
	logger := slog.New(slog.DiscardHandler)
	srv := httpapi.New(httpapi.Config{AdminToken: AdminToken, MapError: w.MapError}, logger)
	events := w.Wire(Parts{DB: db, FailPoints: fp, HTTP: srv, Admin: srv.Admin(), Facts: admin.NewFactsReader(db, w.Consumer), Logger: logger})
	guard := versionguard.New(w.Consumer, events.Transitions, events.Apply)
	if events.ApplyBatch != nil {
		guard = versionguard.NewBatch(w.Consumer, events.Transitions, events.ApplyBatch)
	}
	return New(t, db, w.Consumer, srv.Echo, guard.WithLateFacts(events.LateFacts))
}

// Call posts body to the reconciliation endpoint with token as the bearer
// (none when empty) and returns the status and the trimmed answer.
func (f *Fixture) Call(body, token string) (int, string) {
	f.T.Helper()
	return f.Do(http.MethodPost, "/admin/reconciliation/orders", body, token, nil)
}

// ExpectRefusals fails the test unless POST /admin/reconciliation/orders
// answers 400 INVALID_REQUEST naming the field to bodies that break the
// request's rules, and 401 without the admin token or with a wrong one:
// the route every consumer registers through pkg/admin, checked against
// each consumer's own wiring.
func (f *Fixture) ExpectRefusals() {
	f.T.Helper()
	for _, tt := range []struct{ body, field string }{
		{`{"orderIds":[]}`, "orderIds must hold"},
		{`{"orderIds":["O-1",""]}`, "orderIds[1] is required"},
		{`{"orderIds":["O-1","O 2"]}`, "orderIds[1] must be"},
		{`{"orderIds":`, "malformed JSON"},
	} {
		code, raw := f.Call(tt.body, AdminToken)
		var e httpapi.ErrorBody
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			f.T.Fatalf("%s: %d %s: %v", tt.body, code, raw, err)
		}
		if code != http.StatusBadRequest || e.BusinessCode != httpapi.CodeInvalidRequest || !strings.HasPrefix(e.Message, tt.field) {
			f.T.Fatalf("%s: %d %s, want 400 naming %s", tt.body, code, raw, tt.field)
		}
	}
	for _, token := range []string{"", "wrong"} {
		if code, raw := f.Call(`{"orderIds":["O-1"]}`, token); code != http.StatusUnauthorized {
			f.T.Fatalf("with token %q: %d %s, want 401", token, code, raw)
		}
	}
}

// ExpectEffects pages through GET /admin/reconciliation/effects, two ids a
// page, and fails the test unless it lists exactly orderIDs (ascending);
// and unless nothing is listed as written before the effects were.
func (f *Fixture) ExpectEffects(orderIDs ...string) {
	f.T.Helper()
	f.ExpectEffectsBefore("2999-01-01T00:00:00Z", orderIDs...)
	if code, raw := f.Do(http.MethodGet, "/admin/reconciliation/effects?before=2000-01-01T00:00:00Z", "", AdminToken, nil); code != http.StatusOK ||
		raw != `{"orderIds":[],"next":""}` {
		f.T.Fatalf("effects written before 2000: %d %s", code, raw)
	}
}

// ExpectEffectsBefore pages through GET /admin/reconciliation/effects
// with before (RFC 3339), two ids a page, and fails the test unless it
// lists exactly orderIDs (ascending).
func (f *Fixture) ExpectEffectsBefore(before string, orderIDs ...string) {
	f.T.Helper()
	var got []string
	after := ""
	for range len(orderIDs) + 2 {
		code, raw := f.Do(http.MethodGet, "/admin/reconciliation/effects?limit=2&before="+before+"&after="+after, "", AdminToken, nil)
		var page admin.EffectOrders
		if code != http.StatusOK || json.Unmarshal([]byte(raw), &page) != nil {
			f.T.Fatalf("effects after %q: %d %s", after, code, raw)
		}
		got = append(got, page.OrderIDs...)
		if after = page.Next; after == "" {
			break
		}
	}
	if !slices.Equal(got, orderIDs) {
		f.T.Fatalf("effects written before %s of orders %v, want %v", before, got, orderIDs)
	}
}

// Do sends body (JSON, when there is one) to path with method, token as
// the bearer (none when empty) and header's fields, and returns the status
// and the trimmed answer.
func (f *Fixture) Do(method, path, body, token string, header http.Header) (int, string) {
	f.T.Helper()
	req, err := http.NewRequest(method, f.URL+path, strings.NewReader(body))
	if err != nil {
		f.T.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		f.T.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(raw))
}

// Process applies env and fails the test unless its outcome is want.
func (f *Fixture) Process(env event.Envelope, want versionguard.Outcome) {
	f.T.Helper()
	Process(f.T, f.Proc, env, want)
}

// DeadLetter records env as dead-lettered while it waited for a gap, and
// returns the record's id.
func (f *Fixture) DeadLetter(env event.Envelope) int64 {
	f.T.Helper()
	id, err := f.Dead.Add(context.Background(), dlq.Record{Consumer: f.Consumer, EventID: env.EventID, AggregateID: env.AggregateID,
		EventType: string(env.EventType), OriginalTopic: "order-events", Value: []byte("{}"),
		FailureReason: "WAITING_FOR_GAP: versions 3-4 missing", ErrorClass: "PERMANENT", Attempts: 1, FirstFailedAt: time.Now()})
	if err != nil {
		f.T.Fatal(err)
	}
	return id
}

// Stamp is the time query reads, as the endpoint writes times.
func (f *Fixture) Stamp(query string, args ...any) string {
	f.T.Helper()
	var ts time.Time
	if err := f.DB.Get(&ts, query, args...); err != nil {
		f.T.Fatal(err)
	}
	return ts.UTC().Format(time.RFC3339Nano)
}

// Money parses a literal amount.
func Money(s string) event.Money {
	m, err := event.ParseMoney(s)
	if err != nil {
		panic(err) // only literal amounts are passed
	}
	return m
}
