package e2e_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// gatedOrders stands between reconciliation and the order service: a
// run's first read of the orders' changes waits at its gate until the test
// opens it, so the run is held while the test looks at it.
type gatedOrders struct {
	proxy   *httputil.ReverseProxy
	once    sync.Once
	reached chan struct{} // closed when a read waits at the gate
	gate    chan struct{} // closed by the test
}

func (g *gatedOrders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/admin/reconciliation/orders" {
		g.once.Do(func() { close(g.reached) })
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
	}
	g.proxy.ServeHTTP(w, r)
}

// TestAReconciliationRunOutlivesItsRequest: POST
// /admin/reconciliation/runs answers 202 with the run's id while the run is
// held at its first read (so before it finished); the run is RUNNING, a
// replay of the POST with its Idempotency-Key answers the same run, a
// second start is refused with 409 RUN_IN_PROGRESS; let go, the run ends
// SUCCEEDED with the finding of an effect a consumer lost.
func TestAReconciliationRunOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-R", 10)
	placePaidOrder(t, s, "O-R1", "SKU-R")
	var ids []string
	for _, e := range s.JSON("order", "GET", "/orders/O-R1/events", nil, 200)["events"].([]any) {
		ids = append(ids, e.(map[string]any)["eventId"].(string))
	}
	if err := drill.RestoreBackup(t.Context(), s.DatabaseURL("inventory"), "inventory", "O-R1", ids); err != nil {
		t.Fatal(err)
	}

	target, err := url.Parse(s.URL("order"))
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedOrders{proxy: httputil.NewSingleHostReverseProxy(target), reached: make(chan struct{}), gate: make(chan struct{})}
	proxy := httptest.NewServer(g)
	var opened sync.Once
	open := func() { opened.Do(func() { close(g.gate) }) }
	t.Cleanup(func() { open(); proxy.Close() })
	s.Restart("reconciliation", map[string]string{"ORDER_URL": proxy.URL})

	api := s.API()
	start := func(key string) (int, suiteapi.Run, string) {
		t.Helper()
		code, raw, err := api.Raw(t.Context(), suiteapi.Reconciliation, http.MethodPost, "/admin/reconciliation/runs",
			http.Header{suiteapi.IdempotencyKeyHeader: {key}, "X-Operator": {"e2e"}}, map[string]any{"minAge": "0s"})
		if err != nil {
			t.Fatal(err)
		}
		var r suiteapi.Run
		_ = json.Unmarshal(raw, &r)
		return code, r, string(raw)
	}
	code, started, raw := start("run-r1")
	if code != http.StatusAccepted || started.ID == 0 || started.Status != suiteapi.Running || started.StartedBy != "e2e" {
		t.Fatalf("start: %d %s, want 202 with the RUNNING run", code, raw)
	}
	<-g.reached // the run is held at its first read
	running, err := api.ReconciliationRun(t.Context(), started.ID)
	if err != nil || running.Status != suiteapi.Running || running.FinishedAt != nil {
		t.Fatalf("held run: %+v, %v; want RUNNING", running, err)
	}
	if code, again, raw := start("run-r1"); code != http.StatusAccepted || again.ID != started.ID {
		t.Fatalf("replay of the start: %d %s, want 202 with run %d", code, raw, started.ID)
	}
	if code, _, raw := start("run-r2"); code != http.StatusConflict || !strings.Contains(raw, "RUN_IN_PROGRESS") {
		t.Fatalf("a second start while the run runs: %d %s, want 409 RUN_IN_PROGRESS", code, raw)
	}

	open()
	done, err := api.AwaitRun(t.Context(), started.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != "SUCCEEDED" || done.Checked < 1 || done.FinishedAt == nil ||
		!strings.Contains(strings.Join(suiteapi.Kinds(done), ","), "MISSING_EFFECT inventory REPUBLISH") {
		t.Fatalf("finished run: %+v, want SUCCEEDED with O-R1's lost inventory effect", done)
	}
}
