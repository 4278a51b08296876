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
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/ports"
)

// recorder stands for the reconciler: it records the runs started in
// the real audit store, RUNNING, and finishes one with one finding when
// the test says so; it checks orders from a table.
type recorder struct {
	store  *adapters.Store
	scopes []rec.Scope
	by     []string
}

func (r *recorder) Start(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	run, err := r.store.StartRun(ctx, startedBy, scope)
	if err == nil {
		r.scopes, r.by = append(r.scopes, scope), append(r.by, startedBy)
	}
	return run, err
}

// finish ends run id as a run that found one missing effect and
// republished it.
func (r *recorder) finish(t *testing.T, id int64) {
	t.Helper()
	ctx := context.Background()
	run, err := r.store.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	run.Findings = []rec.Recorded{{RunID: run.ID, OrderID: "O-1", Kind: rec.MissingEffect, Service: rec.ServiceInventory,
		Expected: "DEDUCTED", Actual: "NONE", Action: rec.ActionRepublish, Outcome: "DONE: 3 messages of order due again"}}
	if err := r.store.AddFindings(ctx, run.ID, run.Findings); err != nil {
		t.Fatal(err)
	}
	run.Status, run.Checked, run.Actions = rec.RunSucceeded, 1, 1
	if err := r.store.FinishRun(ctx, run); err != nil {
		t.Fatal(err)
	}
}

func (r *recorder) Check(_ context.Context, orderID string) (app.Check, error) {
	if orderID == "O-404" {
		return app.Check{}, app.ErrOrderNotFound
	}
	return app.Check{OrderID: orderID, Converged: false, Recorded: 1,
		Mismatches: []rec.Finding{{Kind: rec.MissingEffect, Service: rec.ServiceInventory, Expected: "DEDUCTED", Actual: "NONE"}}}, nil
}

func (r *recorder) Deadline() time.Duration { return 30 * time.Second }

func serve(t *testing.T) (string, *recorder) {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, idempotency.Schema(), postgres.MigrationSet{Name: "reconciliation", FS: os.DirFS("../../migrations")})
	store := adapters.NewStore(db)
	r := &recorder{store: store}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httpapi.New(httpapi.Config{AdminToken: "tok", MapError: ports.MapError}, logger)
	admin := srv.Admin()
	admin.Use(idempotency.NewStore(db, idempotency.Config{}).Middleware(logger, nil, nil)) // as pkg/service installs it
	ports.NewHandler(r, store).Register(admin)
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return ts.URL, r
}

// answer is an HTTP answer: its status, headers and JSON body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func send(t *testing.T, method, url, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Operator", "alice")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, url, raw)
	}
	return answer{resp.StatusCode, resp.Header, out}
}

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	a := send(t, method, url, body, nil)
	return a.status, a.body
}

func TestAPI(t *testing.T) {
	url, r := serve(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		finish                   bool // the run started ends before the next step
	}{
		{"a run over every order", "POST", "/admin/reconciliation/runs", "", 202, "", false},
		{"a second run while it runs", "POST", "/admin/reconciliation/runs", `{"orderIds":["O-9"]}`, 409, "RUN_IN_PROGRESS", false},
		{"the run, running", "GET", "/admin/reconciliation/runs/1", "", 200, "", true},
		{"a run over two orders of any age", "POST", "/admin/reconciliation/runs", `{"orderIds":["O-1","O-2"],"minAge":"0s"}`, 202, "", true},
		{"a misspelt field", "POST", "/admin/reconciliation/runs", `{"orders":["O-1"]}`, 400, "INVALID_REQUEST", false},
		{"trailing data", "POST", "/admin/reconciliation/runs", `{} {}`, 400, "INVALID_REQUEST", false},
		{"not JSON", "POST", "/admin/reconciliation/runs", `{"orderIds":`, 400, "INVALID_REQUEST", false},
		{"a bad age", "POST", "/admin/reconciliation/runs", `{"minAge":"soon"}`, 400, "INVALID_REQUEST", false},
		{"the run", "GET", "/admin/reconciliation/runs/1", "", 200, "", false},
		{"an unknown run", "GET", "/admin/reconciliation/runs/999", "", 404, "RUN_NOT_FOUND", false},
		{"a run id that is no number", "GET", "/admin/reconciliation/runs/abc", "", 400, "INVALID_REQUEST", false},
		{"the latest runs", "GET", "/admin/reconciliation/runs?limit=5", "", 200, "", false},
		{"a bad limit", "GET", "/admin/reconciliation/runs?limit=0", "", 400, "INVALID_REQUEST", false},
		{"an order's findings", "GET", "/admin/reconciliation/findings?orderId=O-1", "", 200, "", false},
		{"findings without an order", "GET", "/admin/reconciliation/findings", "", 400, "INVALID_REQUEST", false},
		{"findings of a bad order id", "GET", "/admin/reconciliation/findings?orderId=O%201", "", 400, "INVALID_REQUEST", false},
		{"an order's convergence", "GET", "/admin/reconciliation/orders/O-1", "", 200, "", false},
		{"an unknown order's convergence", "GET", "/admin/reconciliation/orders/O-404", "", 404, "ORDER_NOT_FOUND", false},
	}
	var last int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := send(t, tt.method, url+tt.path, tt.body, nil)
			if a.status != tt.status || (tt.code != "" && a.body["businessCode"] != tt.code) {
				t.Fatalf("%d %v, want %d %s", a.status, a.body, tt.status, tt.code)
			}
			if tt.code != "" && a.body["message"] == "" {
				t.Fatalf("error without a message: %v", a.body)
			}
			if tt.status == 202 {
				last = int64(a.body["id"].(float64))
				if a.body["status"] != "RUNNING" || a.header.Get("Location") != fmt.Sprintf("/admin/reconciliation/runs/%d", last) {
					t.Fatalf("started: %v, Location %q; want the RUNNING run and its address", a.body, a.header.Get("Location"))
				}
			}
			if tt.code == "RUN_IN_PROGRESS" && !strings.Contains(a.body["message"].(string), fmt.Sprintf("run %d ", last)) {
				t.Fatalf("refused: %v, want the running run %d named", a.body, last)
			}
			if tt.finish {
				r.finish(t, last)
			}
		})
	}
	if len(r.scopes) != 2 || r.scopes[0].MinAge != 30*time.Second || len(r.scopes[1].OrderIDs) != 2 || r.scopes[1].MinAge != 0 || r.by[0] != "alice" {
		t.Fatalf("runs asked %+v by %v: want the deadline by default, then two orders at any age, started by alice", r.scopes, r.by)
	}

	_, run := call(t, "GET", url+"/admin/reconciliation/runs/1", "")
	findings, _ := run["findings"].([]any)
	if run["status"] != "SUCCEEDED" || run["startedBy"] != "alice" || run["checked"] != 1.0 || len(findings) != 1 || run["finishedAt"] == nil {
		t.Fatalf("run %v", run)
	}
	f := findings[0].(map[string]any)
	for _, field := range []string{"orderId", "kind", "service", "expected", "actual", "action", "outcome"} {
		if f[field] == "" || f[field] == nil {
			t.Fatalf("finding %v lacks %s", f, field)
		}
	}
	_, byOrder := call(t, "GET", url+"/admin/reconciliation/findings?orderId=O-1", "")
	if byOrder["count"] != 2.0 {
		t.Fatalf("findings of O-1: %v, want the two runs' findings", byOrder)
	}
	_, check := call(t, "GET", url+"/admin/reconciliation/orders/O-1", "")
	if check["converged"] != false || check["findings"] != 1.0 || len(check["mismatches"].([]any)) != 1 {
		t.Fatalf("check %v", check)
	}

	req, _ := http.NewRequest("POST", url+"/admin/reconciliation/runs", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a run without the admin token: %d", resp.StatusCode)
	}
}

// TestAStartIsReplayedByItsKey: a POST sent again with its Idempotency-Key
// answers the same 202 and run id, marked replayed, and starts no second
// run, while the run goes on and after it finished; a new key while it
// runs is refused with 409, which does not keep the key.
func TestAStartIsReplayedByItsKey(t *testing.T) {
	url, r := serve(t)
	key := map[string]string{"Idempotency-Key": "run-1"}
	first := send(t, "POST", url+"/admin/reconciliation/runs", `{"minAge":"0s"}`, key)
	if first.status != 202 || first.body["status"] != "RUNNING" {
		t.Fatalf("first: %d %v", first.status, first.body)
	}
	again := send(t, "POST", url+"/admin/reconciliation/runs", `{"minAge":"0s"}`, key)
	if again.status != 202 || again.body["id"] != first.body["id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay while running: %d %v (replayed %q), want 202 with run %v", again.status, again.body,
			again.header.Get("Idempotent-Replayed"), first.body["id"])
	}
	other := map[string]string{"Idempotency-Key": "run-2"}
	if busy := send(t, "POST", url+"/admin/reconciliation/runs", `{"minAge":"0s"}`, other); busy.status != 409 {
		t.Fatalf("another key while the run runs: %d %v, want 409", busy.status, busy.body)
	}
	r.finish(t, int64(first.body["id"].(float64)))
	later := send(t, "POST", url+"/admin/reconciliation/runs", `{"minAge":"0s"}`, key)
	if later.status != 202 || later.body["id"] != first.body["id"] || len(r.scopes) != 1 {
		t.Fatalf("replay after the run: %d %v, %d runs asked; want run %v again and no new run", later.status, later.body,
			len(r.scopes), first.body["id"])
	}
	if retried := send(t, "POST", url+"/admin/reconciliation/runs", `{"minAge":"0s"}`, other); retried.status != 202 || retried.body["id"] == first.body["id"] {
		t.Fatalf("the refused key once the run finished: %d %v, want a new run", retried.status, retried.body)
	}
}
