package ports_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
	"github.com/reliable-orders/fulfillment/services/console/internal/ports"
)

// fakeTimelines knows order O-1 only.
type fakeTimelines struct{}

func (fakeTimelines) Build(_ context.Context, id string) (app.Timeline, error) {
	if id != "O-1" {
		return app.Timeline{}, app.ErrOrderNotFound
	}
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	return app.Timeline{OrderID: id, Clocks: app.Clocks(), Entries: []app.Entry{
		{Service: "payment", Step: app.StepRequest, At: at, Clock: app.ClockRequest, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Source: app.SourceTrace},
		{Service: "inventory", Step: app.StepApplied, At: at.Add(8 * time.Millisecond), Clock: app.ClockConsumer, EventType: "OrderPaid", Source: app.SourceTrace},
	}}, nil
}

// fakeDLQ holds one dead letter of points and records the replays.
type fakeDLQ struct {
	replays []string // "service id operator key"
}

func (f *fakeDLQ) List(context.Context, string) ([]app.DeadLetter, []app.Unread) {
	return []app.DeadLetter{{Service: "points", DeadLetter: suiteapi.DeadLetter{ID: 7, AggregateID: "O-1", EventID: "E-1",
			EventType: "OrderPaid", ErrorClass: "RETRYABLE", Status: "DEAD"}}},
		[]app.Unread{{Service: "inventory", What: "dead letters", Error: "connection refused"}}
}

func (f *fakeDLQ) Replay(_ context.Context, service string, id int64, operator, key string) (suiteapi.ReplayResult, error) {
	if service != "points" {
		return suiteapi.ReplayResult{}, fmt.Errorf("%w: %s", app.ErrNotAConsumer, service)
	}
	if id != 7 {
		return suiteapi.ReplayResult{}, &suiteapi.StatusError{Status: 404, BusinessCode: "DEAD_LETTER_NOT_FOUND", Message: "no dead letter 8"}
	}
	f.replays = append(f.replays, fmt.Sprintf("%s %d %s %s", service, id, operator, key))
	return suiteapi.ReplayResult{ID: id, EventID: "E-1", Outcome: "APPLIED"}, nil
}

// server is the console's HTTP server as run.go builds it, served in
// memory.
func server(t *testing.T, cfg ports.Config, loopback bool) http.Handler {
	t.Helper()
	srv := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", LoopbackHostOnly: loopback}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := ports.Register(srv.Echo, cfg, deps(&fakeDLQ{}, &fakeSwitches{})); err != nil {
		t.Fatal(err)
	}
	return srv.Echo
}

func deps(dlq *fakeDLQ, sw *fakeSwitches) ports.Deps {
	return ports.Deps{Timelines: fakeTimelines{}, DeadLetters: dlq, Monitor: fakeMonitor{}, Drills: &fakeDrills{}, Switches: sw}
}

// fakeMonitor has two samples of inventory.
type fakeMonitor struct{}

func (fakeMonitor) Watch() []app.Series {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	return []app.Series{{Service: "inventory", Samples: []app.Sample{{At: at, TotalLag: 500, OldestAgeSeconds: 3}, {At: at.Add(2 * time.Second), TotalLag: 20, ConsumedPerSecond: 240}}},
		{Service: "points"}}
}

// fakeDrills knows the duplicate drill; a second start while the first
// runs is refused.
type fakeDrills struct{ started []string }

func (f *fakeDrills) Catalog() []app.DrillCase {
	return []app.DrillCase{{Name: "duplicate/paid-twice", Drill: "duplicate"}}
}

func (f *fakeDrills) Start(selection, operator string) (app.DrillRun, error) {
	switch {
	case selection != "duplicate" && selection != "duplicate/paid-twice" && selection != "all":
		return app.DrillRun{}, fmt.Errorf("%w %q", app.ErrUnknownDrill, selection)
	case len(f.started) > 0:
		return app.DrillRun{}, fmt.Errorf("%w: run 1", app.ErrDrillRunning)
	}
	f.started = append(f.started, selection+" "+operator)
	return app.DrillRun{ID: 1, Selection: selection, Operator: operator, Status: app.DrillQueued, Cases: []string{"duplicate/paid-twice"}}, nil
}

func (f *fakeDrills) Runs() []app.DrillRun {
	return []app.DrillRun{{ID: 1, Selection: "duplicate", Status: app.DrillDone, Operator: "alice",
		Results: []app.DrillResult{{Case: "duplicate/paid-twice", Verdict: "PASS", ConvergenceMs: 120}}}}
}

func (f *fakeDrills) Get(id int) (app.DrillRun, bool) {
	if id != 1 {
		return app.DrillRun{}, false
	}
	return f.Runs()[0], true
}

// fakeSwitches: points has one fail point; without control, every flip is
// refused.
type fakeSwitches struct {
	noControl bool
	flips     []string
}

func (f *fakeSwitches) State(context.Context) app.SwitchesView {
	return app.SwitchesView{Controlled: !f.noControl, Services: []app.ServiceSwitches{
		{Service: "points", FailPoints: []failpoint.Point{{Name: "points.apply", Action: "off"}},
			Processes: []controlapi.ServiceView{{Name: "points", State: "running", PID: 42}}},
		{Service: "reconciliation", FailPointsError: "it serves no fail points (FAILPOINTS_ENABLED=false)"},
	}}
}

func (f *fakeSwitches) ArmFailPoint(_ context.Context, svc, name, action string, times int, op string) error {
	f.flips = append(f.flips, fmt.Sprintf("arm %s %s %s %d %s", svc, name, action, times, op))
	return nil
}

func (f *fakeSwitches) flip(what, svc, op string) error {
	if f.noControl {
		return app.ErrNoControl
	}
	if svc != "points" && svc != "inventory" {
		return fmt.Errorf("%w: %s", app.ErrUnknownService, svc)
	}
	f.flips = append(f.flips, what+" "+svc+" "+op)
	return nil
}

func (f *fakeSwitches) Stop(_ context.Context, svc, op string) (controlapi.ServiceView, error) {
	return controlapi.ServiceView{Name: svc, State: "stopped"}, f.flip("stop", svc, op)
}

func (f *fakeSwitches) Start(_ context.Context, svc, op string) (controlapi.ServiceView, error) {
	return controlapi.ServiceView{Name: svc, State: "running", Run: 2}, f.flip("start", svc, op)
}

func (f *fakeSwitches) Scale(_ context.Context, svc string, n int, op string) (controlapi.ScaleView, error) {
	return controlapi.ScaleView{Service: svc, Instances: make([]controlapi.ServiceView, n)}, f.flip(fmt.Sprintf("scale %d", n), svc, op)
}

func TestRoutes(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name       string
		cfg        ports.Config
		loopback   bool
		method     string
		path       string
		host       string
		header     map[string]string
		wantStatus int
		wantBody   string
	}{
		{"home", ports.Config{Development: true}, true, "GET", "/", "127.0.0.1:8087", nil, 200, "Follow an order"},
		{"an order's page", ports.Config{Development: true}, true, "GET", "/orders/O-1", "localhost:8087", nil, 200, `data-step="applied"`},
		{"an order's fragment", ports.Config{Development: true}, true, "GET", "/orders/O-1?fragment=1", "localhost:8087", nil, 200, `id="order-id">O-1<`},
		{"an unknown order's page", ports.Config{Development: true}, true, "GET", "/orders/O-9", "127.0.0.1", nil, 404, "does not know order O-9"},
		{"the timeline as JSON", ports.Config{Development: true}, true, "GET", "/api/orders/O-1/timeline", "127.0.0.1", nil, 200, `"step":"request accepted"`},
		{"an unknown order's timeline", ports.Config{Development: true}, true, "GET", "/api/orders/O-9/timeline", "127.0.0.1", nil, 404, `"businessCode":"ORDER_NOT_FOUND"`},
		{"a bad order id", ports.Config{Development: true}, true, "GET", "/api/orders/O%0A1/timeline", "127.0.0.1", nil, 400, `"businessCode":"INVALID_REQUEST"`},
		{"the search redirects", ports.Config{Development: true}, true, "GET", "/orders?orderId=O-1", "127.0.0.1", nil, 303, ""},
		{"the assets are embedded", ports.Config{Development: true}, true, "GET", "/static/console.js", "127.0.0.1", nil, 200, "data-refresh"},
		{"a foreign Host on loopback", ports.Config{Development: true}, true, "GET", "/orders/O-1", "evil.example:8087", nil, 403, "FORBIDDEN_HOST"},
		{"a change from a foreign origin", ports.Config{Development: true}, true, "POST", "/orders/O-1", "127.0.0.1:8087",
			map[string]string{"Origin": "http://evil.example"}, 403, "FORBIDDEN_ORIGIN"},
		{"the token asked of a page", ports.Config{AdminToken: token}, false, "GET", "/orders/O-1", "console.example", nil, 401, "admin token required"},
		{"a wrong token", ports.Config{AdminToken: token}, false, "GET", "/orders/O-1", "console.example",
			map[string]string{"Authorization": "Bearer nope"}, 401, ""},
		{"the token as a bearer", ports.Config{AdminToken: token}, false, "GET", "/api/orders/O-1/timeline", "console.example",
			map[string]string{"Authorization": "Bearer " + token}, 200, `"orderId":"O-1"`},
		{"the token as a basic password", ports.Config{AdminToken: token}, false, "GET", "/orders/O-1", "console.example",
			map[string]string{"Authorization": basic("alice", token)}, 200, "Order"},
		{"the dead letters", ports.Config{Development: true}, true, "GET", "/dlq", "127.0.0.1", nil, 200, `action="/api/dlq/points/7/replay"`},
		{"the dead letters' unread consumer", ports.Config{Development: true}, true, "GET", "/dlq?status=all", "127.0.0.1", nil, 200, "inventory did not answer"},
		{"a bad status filter", ports.Config{Development: true}, true, "GET", "/dlq?status=GONE", "127.0.0.1", nil, 400, "want DEAD, REPLAYED or ALL"},
		{"the consumers' charts", ports.Config{Development: true}, true, "GET", "/consumers", "127.0.0.1", nil, 200, `<polyline points="0.0,0.0 300.0,96.0"`},
		{"the consumers' samples", ports.Config{Development: true}, true, "GET", "/api/consumers", "127.0.0.1", nil, 200, `"totalLag":500`},
		{"the drills", ports.Config{Development: true}, true, "GET", "/drills", "127.0.0.1", nil, 200, `data-verdict="PASS"`},
		{"a drill run", ports.Config{Development: true}, true, "GET", "/api/drills/runs/1", "127.0.0.1", nil, 200, `"verdict":"PASS"`},
		{"a drill run not kept", ports.Config{Development: true}, true, "GET", "/api/drills/runs/9", "127.0.0.1", nil, 404, "RUN_NOT_FOUND"},
		{"the switches", ports.Config{Development: true}, true, "GET", "/switches", "127.0.0.1", nil, 200, `action="/api/failpoints/points/points.apply"`},
		{"the probes are open", ports.Config{AdminToken: token}, false, "GET", "/healthz", "console.example", nil, 200, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Host = tt.host
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			server(t, tt.cfg, tt.loopback).ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%s %s: %d %.300s, want %d with %q", tt.method, tt.path, rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
			}
			if rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("401 without a basic challenge: the browser would not ask for the token")
			}
		})
	}
}

func TestReplay(t *testing.T) {
	tests := []struct {
		name       string
		path, body string
		header     map[string]string
		wantStatus int
		wantBody   string
		wantReplay string
	}{
		{"as JSON", "/api/dlq/points/7/replay", `{"operator":"alice","key":"k-1"}`, nil, 200, `"outcome":"APPLIED"`, "points 7 alice k-1"},
		{"as the page's fragment", "/api/dlq/points/7/replay", `{"operator":"bob","key":"k-2"}`, map[string]string{"Accept": "text/html"}, 200,
			`data-outcome="APPLIED"`, "points 7 bob k-2"},
		{"the login names the operator", "/api/dlq/points/7/replay", `{"operator":"bob"}`, map[string]string{"Authorization": basic("carol", "x")}, 200,
			"APPLIED", "points 7 carol "},
		{"without a name", "/api/dlq/points/7/replay", "", nil, 200, "APPLIED", "points 7 console "},
		{"of a service without dead letters", "/api/dlq/order/7/replay", `{}`, nil, 404, "NOT_A_CONSUMER", ""},
		{"of a letter the consumer does not have", "/api/dlq/points/8/replay", `{}`, nil, 404, "DEAD_LETTER_NOT_FOUND", ""},
		{"its refusal as the page's fragment", "/api/dlq/points/8/replay", `{}`, map[string]string{"Accept": "text/html"}, 404, "Not replayed", ""},
		{"a bad id", "/api/dlq/points/x7/replay", `{}`, nil, 400, "INVALID_REQUEST", ""},
		{"an unknown field", "/api/dlq/points/7/replay", `{"who":"alice"}`, nil, 400, "INVALID_REQUEST", ""},
		{"an operator with a line break", "/api/dlq/points/7/replay", `{"operator":"a\nb"}`, nil, 400, "INVALID_REQUEST", ""},
		{"a form post", "/api/dlq/points/7/replay", "operator=alice", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"from a foreign page", "/api/dlq/points/7/replay", `{}`, map[string]string{"Origin": "http://evil.example"}, 403, "FORBIDDEN_ORIGIN", ""},
		{"from the console's page", "/api/dlq/points/7/replay", `{}`, map[string]string{"Origin": "http://127.0.0.1:8087"}, 200, "APPLIED", "points 7 console "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dlq := &fakeDLQ{}
			srv := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", LoopbackHostOnly: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if _, err := ports.Register(srv.Echo, ports.Config{Development: true}, deps(dlq, &fakeSwitches{})); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body))
			req.Host = "127.0.0.1:8087"
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			srv.Echo.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%d %.300s, want %d with %q", rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
			}
			got := strings.Join(dlq.replays, ";")
			if got != tt.wantReplay {
				t.Errorf("replays %q, want %q", got, tt.wantReplay)
			}
		})
	}
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name       string
		noControl  bool
		path, body string
		html       bool
		wantStatus int
		wantBody   string
		wantFlip   string
		wantDrill  string
	}{
		{"start a drill", false, "/api/drills/runs", `{"selection":"duplicate","operator":"alice"}`, false, 202, `"status":"QUEUED"`, "", "duplicate alice"},
		{"start a drill from the page", false, "/api/drills/runs", `{"selection":"all","operator":"alice"}`, true, 202, "Run 1 (all, 1 cases) started by alice", "", "all alice"},
		{"an unknown drill", false, "/api/drills/runs", `{"selection":"chaos"}`, false, 400, "UNKNOWN_DRILL", "", ""},
		{"arm a fail point", false, "/api/failpoints/points/points.apply", `{"action":"error","times":2,"operator":"bob"}`, false, 200, "armed points.apply", "arm points points.apply error 2 bob", ""},
		{"disarm it from the page", false, "/api/failpoints/points/points.apply", `{"action":"off","times":0}`, true, 200, "disarmed points.apply", "arm points points.apply off 0 console", ""},
		{"a negative count", false, "/api/failpoints/points/points.apply", `{"action":"error","times":-1}`, false, 400, "INVALID_REQUEST", "", ""},
		{"stop a service", false, "/api/services/points/stop", `{"operator":"carol"}`, false, 200, "stopped by carol", "stop points carol", ""},
		{"start it", false, "/api/services/points/start", "", false, 200, "run 2", "start points console", ""},
		{"scale a consumer", false, "/api/services/inventory/scale", `{"instances":3}`, false, 200, "scaled to 3 processes", "scale 3 inventory console", ""},
		{"scale to nothing", false, "/api/services/inventory/scale", `{"instances":0}`, false, 400, "want 1 or more", "", ""},
		{"an unknown verb", false, "/api/services/points/kill", `{}`, false, 404, "want stop, start or scale", "", ""},
		{"an unknown service", false, "/api/services/kafka/stop", `{}`, false, 404, "UNKNOWN_SERVICE", "", ""},
		{"no control API", true, "/api/services/points/stop", `{}`, false, 409, "NO_CONTROL_API", "", ""},
		{"no control API, to the page", true, "/api/services/points/stop", `{}`, true, 409, "Refused:", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw := &fakeSwitches{noControl: tt.noControl}
			d := deps(&fakeDLQ{}, sw)
			drills := d.Drills.(*fakeDrills)
			srv := httpapi.New(httpapi.Config{Addr: "127.0.0.1:0", LoopbackHostOnly: true}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if _, err := ports.Register(srv.Echo, ports.Config{Development: true}, d); err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", tt.path, strings.NewReader(tt.body))
			req.Host = "127.0.0.1:8087"
			if tt.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			if tt.html {
				req.Header.Set("Accept", "text/html")
			}
			rec := httptest.NewRecorder()
			srv.Echo.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Fatalf("%d %.300s, want %d with %q", rec.Code, rec.Body.String(), tt.wantStatus, tt.wantBody)
			}
			if got := strings.Join(sw.flips, ";"); got != tt.wantFlip {
				t.Errorf("flips %q, want %q", got, tt.wantFlip)
			}
			if got := strings.Join(drills.started, ";"); got != tt.wantDrill {
				t.Errorf("drills %q, want %q", got, tt.wantDrill)
			}
		})
	}
}

func basic(user, pass string) string {
	req := httptest.NewRequest("GET", "/", nil)
	req.SetBasicAuth(user, pass)
	return req.Header.Get("Authorization")
}

func TestTimelineJSONShape(t *testing.T) {
	req := httptest.NewRequest("GET", "/api/orders/O-1/timeline", nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	server(t, ports.Config{Development: true}, true).ServeHTTP(rec, req)
	var out struct {
		Entries []map[string]any `json:"entries"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	for _, e := range out.Entries {
		for _, k := range []string{"service", "step", "at", "source"} {
			if _, ok := e[k]; !ok {
				t.Errorf("entry %v has no %q", e, k)
			}
		}
	}
	if len(out.Entries) != 2 || out.Entries[0]["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("entries %v", out.Entries)
	}
}
