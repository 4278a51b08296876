package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/drill"
)

func TestSelect(t *testing.T) {
	all := len(drill.Cases())
	tests := []struct {
		names   []string
		want    int
		first   string
		wantErr bool
	}{
		{names: []string{"all"}, want: all, first: "duplicate/twice"},
		{names: []string{"loss"}, want: 8, first: "loss/before-publish"},
		{names: []string{"replay", "duplicate"}, want: 7, first: "duplicate/twice"},
		{names: []string{"poison/invalid-json"}, want: 1, first: "poison/invalid-json"},
		{names: []string{"backlog"}, wantErr: true},
		{names: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.names, "+"), func(t *testing.T) {
			got, err := drill.Select(tt.names...)
			if tt.wantErr {
				if !errors.Is(err, drill.ErrUnknownDrill) {
					t.Fatalf("Select(%v) error %v, want ErrUnknownDrill", tt.names, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want || got[0].Name != tt.first {
				t.Errorf("Select(%v) = %d cases starting %s, want %d starting %s", tt.names, len(got), got[0].Name, tt.want, tt.first)
			}
		})
	}
}

// Every drill of the tutorial has cases, every case name is unique and
// belongs to its drill.
func TestCasesCoverEveryDrill(t *testing.T) {
	seen := map[string]bool{}
	perDrill := map[string]int{}
	for _, c := range drill.Cases() {
		if seen[c.Name] {
			t.Errorf("case %s twice", c.Name)
		}
		seen[c.Name] = true
		if !strings.HasPrefix(c.Name, c.Drill+"/") {
			t.Errorf("case %s is not named after its drill %s", c.Name, c.Drill)
		}
		perDrill[c.Drill]++
	}
	for _, d := range drill.Drills() {
		if perDrill[d] == 0 {
			t.Errorf("drill %s has no case", d)
		}
	}
}

func target() drill.Target {
	return drill.Target{URLs: drill.LocalURLs(), Brokers: []string{"127.0.0.1:1"}, RunID: "unit", Timeout: time.Second}
}

// A crash case without a Controller is skipped, not failed; a target
// without URLs fails every case with the reason.
func TestCaseWithoutControllerOrURLs(t *testing.T) {
	crash, err := drill.Select("loss/before-publish")
	if err != nil {
		t.Fatal(err)
	}
	r := crash[0].Run(context.Background(), target())
	if !r.Skipped || r.Pass || r.Verdict() != "SKIP" {
		t.Errorf("crash case without a controller: %+v, want skipped", r)
	}
	bad := target()
	bad.URLs = nil
	r = crash[0].Run(context.Background(), bad)
	if r.Pass || r.Skipped || !strings.Contains(r.Seen, "no URL for the order service") {
		t.Errorf("case without URLs: %+v, want a failure naming the missing URL", r)
	}
	if drill.Failed([]drill.Result{r, {Skipped: true}, {Pass: true}}) != 1 {
		t.Error("Failed counts skips or passes")
	}
}

// restartOnly is a Controller that can restart services and nothing more.
type restartOnly struct{}

func (restartOnly) Restart(context.Context, string, map[string]string) error { return nil }
func (restartOnly) WaitExit(context.Context, string) (int, error)            { return 137, nil }

// noBroker is a BrokerController whose suite runs on brokers it does not
// own, as the control API answers with KAFKA_BROKERS.
type noBroker struct{ restartOnly }

func (noBroker) StopBroker(context.Context) error            { return drill.ErrNoBrokerControl }
func (noBroker) StartBroker(context.Context) error           { return drill.ErrNoBrokerControl }
func (noBroker) LoseAcks(context.Context, string, int) error { return drill.ErrNoBrokerControl }
func (noBroker) LostAcks(context.Context) (int, error)       { return 0, drill.ErrNoBrokerControl }
func (noBroker) ClearFaults(context.Context) error           { return drill.ErrNoBrokerControl }

// faultless is a BrokerController that can stop and start its broker but
// not fault it, as make compose-control answers for Redpanda.
type faultless struct {
	restartOnly
	armed []string
}

func (*faultless) StopBroker(context.Context) error  { return nil }
func (*faultless) StartBroker(context.Context) error { return nil }
func (*faultless) ClearFaults(context.Context) error { return nil }
func (f *faultless) LoseAcks(_ context.Context, topic string, _ int) error {
	f.armed = append(f.armed, topic)
	return fmt.Errorf("%w: Redpanda cannot lose a Produce acknowledgement on request", drill.ErrNoBrokerControl)
}
func (*faultless) LostAcks(context.Context) (int, error) { return 0, drill.ErrNoBrokerControl }

// loss/lost-ack is skipped before it touches the suite when the broker can
// be stopped but not faulted, having tried a topic the suite does not use;
// loss/broker-outage still runs (here it fails: nothing listens).
func TestLostAckSkipsABrokerWithoutFaults(t *testing.T) {
	f := &faultless{}
	tg := target()
	tg.Controller = f
	cases, err := drill.Select("loss/lost-ack", "loss/broker-outage")
	if err != nil {
		t.Fatal(err)
	}
	lost := cases[0].Run(context.Background(), tg)
	if !lost.Skipped || !strings.Contains(lost.Seen, "Redpanda cannot lose") {
		t.Errorf("loss/lost-ack: %+v, want skipped with the controller's reason", lost)
	}
	if len(f.armed) != 1 || f.armed[0] == drill.DefaultTopic || !strings.HasPrefix(f.armed[0], drill.DefaultTopic) {
		t.Errorf("armed on %v, want one try on a probe topic beside %s", f.armed, drill.DefaultTopic)
	}
	if outage := cases[1].Run(context.Background(), tg); outage.Skipped {
		t.Errorf("loss/broker-outage skipped on a broker it can stop: %+v", outage)
	}
}

// The broker and outage cases are skipped, not failed, when the controller
// cannot stop or fault the broker or stop a service, before they touch the
// suite (the target here has nothing listening).
func TestBrokerCasesSkipWithoutBrokerControl(t *testing.T) {
	tests := []struct {
		name       string
		controller drill.Controller
		cases      []string
		want       string
	}{
		{"restart only", restartOnly{}, []string{"loss/lost-ack", "loss/broker-outage"}, "cannot stop the broker"},
		{"restart only", restartOnly{}, []string{"loss/callback-outage"}, "cannot stop a service"},
		{"external brokers", noBroker{}, []string{"loss/lost-ack", "loss/broker-outage"}, "no control of the broker"},
	}
	for _, tt := range tests {
		for _, name := range tt.cases {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				c, err := drill.Select(name)
				if err != nil {
					t.Fatal(err)
				}
				tg := target()
				tg.Controller = tt.controller
				r := c[0].Run(context.Background(), tg)
				if !r.Skipped || r.Pass || !strings.Contains(r.Seen, tt.want) {
					t.Errorf("%s: %+v, want skipped saying %q", name, r, tt.want)
				}
			})
		}
	}
}

func TestTargetValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*drill.Target)
		want   string
	}{
		{"no brokers", func(t *drill.Target) { t.Brokers = nil }, "no Kafka brokers"},
		{"missing URL", func(t *drill.Target) { delete(t.URLs, drill.Points) }, "points"},
		{"bad retry bound", func(t *drill.Target) { t.RetryMaxAttempts = -1 }, "retry max attempts"},
		{"bad retry intervals", func(t *drill.Target) { t.RetryInitialInterval, t.RetryMaxInterval = time.Second, time.Millisecond }, "retry intervals"},
		{"negative outage", func(t *drill.Target) { t.Outage = -time.Second }, "negative outage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := target()
			tt.modify(&tg)
			if err := tg.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v, want an error saying %q", err, tt.want)
			}
		})
	}
	if err := target().Validate(); err != nil {
		t.Errorf("valid target rejected: %v", err)
	}
}

func TestRetryBound(t *testing.T) {
	tests := []struct {
		name             string
		attempts         int
		initial, maximum time.Duration
		want             time.Duration
	}{
		// 1+2+4+8 s nominal, each up to 1.5 times that.
		{"the tutorial's defaults", 0, 0, 0, 22500 * time.Millisecond},
		{"capped", 5, time.Second, 3 * time.Second, 13500 * time.Millisecond},
		{"the harness", 3, 50 * time.Millisecond, 200 * time.Millisecond, 225 * time.Millisecond},
		{"one attempt never waits", 1, time.Second, time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := drill.Target{RetryMaxAttempts: tt.attempts, RetryInitialInterval: tt.initial, RetryMaxInterval: tt.maximum}
			if got := tg.RetryBound(); got != tt.want {
				t.Errorf("RetryBound() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	err := drill.WriteTable(&b, []drill.Result{
		{Case: "duplicate/twice", Pass: true, Expected: "applied once", Seen: "deducted 2 once", Convergence: 1234567 * time.Microsecond},
		{Case: "loss/before-publish", Skipped: true, Expected: "delivered after restart", Seen: "no controller"},
		{Case: "poison/invalid-json", Expected: "DLQ at once", Seen: "attempts 5", Convergence: 42 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"RESULT  CASE                 CONVERGED  EXPECTED                 SEEN",
		"PASS    duplicate/twice      1.23s      applied once             deducted 2 once",
		"SKIP    loss/before-publish  -          delivered after restart  no controller",
		"FAIL    poison/invalid-json  42ms       DLQ at once              attempts 5",
		"",
		"1 passed, 1 failed, 1 skipped",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), strings.Join(want, "\n"))
	}
}

// The ControlClient speaks the runner's control API.
func TestControlClient(t *testing.T) {
	var restarted map[string]string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /services/{name}/restart", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Env map[string]string `json:"env"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.PathValue("name") != "order" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		restarted = req.Env
		_, _ = w.Write([]byte(`{"name":"order","state":"running","run":2}`))
	})
	mux.HandleFunc("GET /services/{name}/exit", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") != "order" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"no such service: \"nope\""}`))
			return
		}
		if r.URL.Query().Get("timeout") != "5s" {
			t.Errorf("wait timeout %q, want 5s", r.URL.Query().Get("timeout"))
		}
		_, _ = w.Write([]byte(`{"name":"order","state":"exited","exitCode":137,"failPoint":true}`))
	})
	mux.HandleFunc("GET /services", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"services":[]}`)) })
	var calls []string
	mux.HandleFunc("POST /services/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "stop "+r.PathValue("name"))
		_, _ = w.Write([]byte(`{"name":"order","state":"stopped","run":2}`))
	})
	mux.HandleFunc("POST /broker/{verb}", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.PathValue("verb"))
		_, _ = w.Write([]byte(`{"embedded":true,"state":"running"}`))
	})
	var armed map[string]any
	mux.HandleFunc("POST /broker/faults", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&armed)
		_, _ = w.Write([]byte(`{"embedded":true,"state":"running","fault":{"hits":0}}`))
	})
	mux.HandleFunc("DELETE /broker/faults", func(w http.ResponseWriter, _ *http.Request) {
		calls = append(calls, "clear")
		_, _ = w.Write([]byte(`{"embedded":true,"state":"running"}`))
	})
	mux.HandleFunc("GET /broker", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"embedded":true,"state":"running","fault":{"type":"lost-ack","hits":3}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c := drill.NewControlClient(srv.URL, 5*time.Second)
	ctx := context.Background()
	if err := c.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(ctx, "order", map[string]string{"FAILPOINTS": "relay.after-publish=exit"}); err != nil {
		t.Fatal(err)
	}
	if restarted["FAILPOINTS"] != "relay.after-publish=exit" {
		t.Errorf("restart sent env %v", restarted)
	}
	code, err := c.WaitExit(ctx, "order")
	if err != nil || code != 137 {
		t.Errorf("WaitExit = %d, %v; want 137", code, err)
	}
	if _, err := c.WaitExit(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "no such service") {
		t.Errorf("WaitExit of an unknown service = %v, want the API's error", err)
	}

	var bc drill.BrokerController = c
	var stopper drill.ServiceStopper = c
	if err := errors.Join(stopper.Stop(ctx, "order"), bc.StopBroker(ctx), bc.StartBroker(ctx), bc.LoseAcks(ctx, "order-events", 4), bc.ClearFaults(ctx)); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(calls, ","); got != "stop order,stop,start,clear" {
		t.Errorf("calls %s, want stop order,stop,start,clear", got)
	}
	if armed["type"] != "lost-ack" || armed["topic"] != "order-events" || armed["count"] != 4.0 {
		t.Errorf("fault armed with %v", armed)
	}
	if hits, err := bc.LostAcks(ctx); err != nil || hits != 3 {
		t.Errorf("LostAcks = %d, %v; want 3", hits, err)
	}
}

// A control API on external brokers answers the broker routes 409, which
// the client reports as ErrNoBrokerControl.
func TestControlClientExternalBroker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"embedded":false,"error":"the suite uses the brokers of KAFKA_BROKERS"}`))
	}))
	defer srv.Close()
	c := drill.NewControlClient(srv.URL, time.Second)
	ctx := context.Background()
	for name, err := range map[string]error{
		"StopBroker":  c.StopBroker(ctx),
		"StartBroker": c.StartBroker(ctx),
		"LoseAcks":    c.LoseAcks(ctx, "order-events", 1),
		"ClearFaults": c.ClearFaults(ctx),
	} {
		if !errors.Is(err, drill.ErrNoBrokerControl) || !strings.Contains(err.Error(), "KAFKA_BROKERS") {
			t.Errorf("%s = %v, want ErrNoBrokerControl with the API's reason", name, err)
		}
	}
	if err := c.Stop(ctx, "order"); err == nil || errors.Is(err, drill.ErrNoBrokerControl) {
		t.Errorf("a 409 on a service route = %v, want a plain error", err)
	}
}

// reorder/gap-deadline waits out PARK_DEADLINE: with the default (5 min),
// or any deadline over drill.MaxParkDeadline, it is skipped with the reason
// before it touches the suite (the target here has nothing listening).
func TestGapDeadlineSkipsALongParkDeadline(t *testing.T) {
	cases, err := drill.Select("reorder/gap-deadline")
	if err != nil {
		t.Fatal(err)
	}
	for _, deadline := range []time.Duration{0, drill.MaxParkDeadline + time.Second} {
		tg := target()
		tg.ParkDeadline = deadline
		r := cases[0].Run(context.Background(), tg)
		if !r.Skipped || !strings.Contains(r.Seen, "PARK_DEADLINE") {
			t.Errorf("park deadline %s: %+v, want a skip naming PARK_DEADLINE", deadline, r)
		}
	}
}
