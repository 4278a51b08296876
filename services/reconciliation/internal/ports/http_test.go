package ports_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/ports"
)

// recorder stands for the reconciler: it records the runs asked of it in
// the real audit store, with one finding, and checks orders from a table.
type recorder struct {
	store  *adapters.Store
	scopes []rec.Scope
	by     []string
}

func (r *recorder) Run(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	r.scopes, r.by = append(r.scopes, scope), append(r.by, startedBy)
	run, err := r.store.StartRun(ctx, startedBy, scope)
	if err != nil {
		return rec.Run{}, err
	}
	run.Findings = []rec.Recorded{{RunID: run.ID, OrderID: "O-1", Kind: rec.MissingEffect, Service: rec.ServiceInventory,
		Expected: "DEDUCTED", Actual: "NONE", Action: rec.ActionRepublish, Outcome: "DONE: 3 messages of order due again"}}
	if err := r.store.AddFindings(ctx, run.ID, run.Findings); err != nil {
		return rec.Run{}, err
	}
	run.Status, run.Checked, run.Actions = rec.RunSucceeded, 1, 1
	return run, r.store.FinishRun(ctx, run)
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
	db, _ := postgrestest.NewDatabase(t, postgres.MigrationSet{Name: "reconciliation", FS: os.DirFS("../../migrations")})
	store := adapters.NewStore(db)
	r := &recorder{store: store}
	srv := httpapi.New(httpapi.Config{AdminToken: "tok", MapError: ports.MapError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ports.NewHandler(context.Background(), r, store).Register(srv.Admin())
	ts := httptest.NewServer(srv.Echo)
	t.Cleanup(ts.Close)
	return ts.URL, r
}

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Operator", "alice")
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
	return resp.StatusCode, out
}

func TestAPI(t *testing.T) {
	url, r := serve(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"a run over every order", "POST", "/admin/reconciliation/runs", "", 200, ""},
		{"a run over two orders of any age", "POST", "/admin/reconciliation/runs", `{"orderIds":["O-1","O-2"],"minAge":"0s"}`, 200, ""},
		{"a misspelt field", "POST", "/admin/reconciliation/runs", `{"orders":["O-1"]}`, 400, "INVALID_REQUEST"},
		{"trailing data", "POST", "/admin/reconciliation/runs", `{} {}`, 400, "INVALID_REQUEST"},
		{"not JSON", "POST", "/admin/reconciliation/runs", `{"orderIds":`, 400, "INVALID_REQUEST"},
		{"a bad age", "POST", "/admin/reconciliation/runs", `{"minAge":"soon"}`, 400, "INVALID_REQUEST"},
		{"the run", "GET", "/admin/reconciliation/runs/1", "", 200, ""},
		{"an unknown run", "GET", "/admin/reconciliation/runs/999", "", 404, "RUN_NOT_FOUND"},
		{"a run id that is no number", "GET", "/admin/reconciliation/runs/abc", "", 400, "INVALID_REQUEST"},
		{"the latest runs", "GET", "/admin/reconciliation/runs?limit=5", "", 200, ""},
		{"a bad limit", "GET", "/admin/reconciliation/runs?limit=0", "", 400, "INVALID_REQUEST"},
		{"an order's findings", "GET", "/admin/reconciliation/findings?orderId=O-1", "", 200, ""},
		{"findings without an order", "GET", "/admin/reconciliation/findings", "", 400, "INVALID_REQUEST"},
		{"findings of a bad order id", "GET", "/admin/reconciliation/findings?orderId=O%201", "", 400, "INVALID_REQUEST"},
		{"an order's convergence", "GET", "/admin/reconciliation/orders/O-1", "", 200, ""},
		{"an unknown order's convergence", "GET", "/admin/reconciliation/orders/O-404", "", 404, "ORDER_NOT_FOUND"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, out := call(t, tt.method, url+tt.path, tt.body)
			if status != tt.status || (tt.code != "" && out["businessCode"] != tt.code) {
				t.Fatalf("%d %v, want %d %s", status, out, tt.status, tt.code)
			}
			if tt.code != "" && out["message"] == "" {
				t.Fatalf("error without a message: %v", out)
			}
		})
	}
	if len(r.scopes) != 2 || r.scopes[0].MinAge != 30*time.Second || len(r.scopes[1].OrderIDs) != 2 || r.scopes[1].MinAge != 0 || r.by[0] != "alice" {
		t.Fatalf("runs asked %+v by %v: want the deadline by default, then two orders at any age, started by alice", r.scopes, r.by)
	}

	_, run := call(t, "GET", url+"/admin/reconciliation/runs/1", "")
	findings, _ := run["findings"].([]any)
	if run["status"] != "SUCCEEDED" || run["startedBy"] != "alice" || run["checked"] != 1.0 || len(findings) != 1 {
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
