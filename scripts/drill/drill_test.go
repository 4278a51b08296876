package drill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
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

// SelectFrom knows only the drills and cases it is given: the console
// offers a subset in its tests.
func TestSelectFromASubset(t *testing.T) {
	subset, err := drill.Select("poison", "replay/twice")
	if err != nil {
		t.Fatal(err)
	}
	got, err := drill.SelectFrom(subset, "replay/twice", "poison")
	if err != nil || len(got) != len(subset) || got[0].Name != subset[0].Name {
		t.Fatalf("SelectFrom(the subset, its drill and case) = %d cases, %v; want the %d of the subset in its order", len(got), err, len(subset))
	}
	if _, err := drill.SelectFrom(subset, "loss"); !errors.Is(err, drill.ErrUnknownDrill) {
		t.Fatalf("SelectFrom(the subset, a drill it lacks) error %v, want ErrUnknownDrill", err)
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

func (restartOnly) Restart(context.Context, string, map[string]string) (controlapi.ServiceView, error) {
	return controlapi.ServiceView{State: "running"}, nil
}

func (restartOnly) Exit(context.Context, string, time.Duration) (controlapi.ServiceView, error) {
	code := 137
	return controlapi.ServiceView{State: "exited", ExitCode: &code}, nil
}

// noBroker is a BrokerController whose suite runs on brokers it does not
// own, as a test harness on external brokers answers.
type noBroker struct{ restartOnly }

func (noBroker) StopBroker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}
func (noBroker) StartBroker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}
func (noBroker) ArmFault(context.Context, controlapi.FaultRequest) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}
func (noBroker) Broker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}
func (noBroker) ClearFault(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}

// faultless is a BrokerController that can stop and start its broker but
// not fault it, as make compose-control answers for Redpanda.
type faultless struct {
	restartOnly
	armed []string
}

func (*faultless) StopBroker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, nil
}
func (*faultless) StartBroker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, nil
}
func (*faultless) ClearFault(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, nil
}
func (f *faultless) ArmFault(_ context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error) {
	f.armed = append(f.armed, req.Topic)
	return controlapi.BrokerView{}, fmt.Errorf("%w: Redpanda cannot lose a Produce acknowledgement on request", drill.ErrNoBrokerControl)
}
func (*faultless) Broker(context.Context) (controlapi.BrokerView, error) {
	return controlapi.BrokerView{}, drill.ErrNoBrokerControl
}

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

// The control API's client is the drills' Controller, BrokerController and
// ServiceStopper as it is.
var (
	_ drill.Controller       = (*controlapi.Client)(nil)
	_ drill.BrokerController = (*controlapi.Client)(nil)
	_ drill.ServiceStopper   = (*controlapi.Client)(nil)
)

// A control API on external brokers answers the broker routes 409: the
// broker cases are skipped with the API's reason, before they touch the
// suite (the target here has nothing listening).
func TestControlAPIExternalBroker(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"embedded":false,"error":"the suite uses the brokers of KAFKA_BROKERS"}`))
	}))
	defer srv.Close()
	cases, err := drill.Select("loss/lost-ack", "loss/broker-outage")
	if err != nil {
		t.Fatal(err)
	}
	tg := target()
	tg.Controller = drill.NewControlClient(srv.URL, time.Second)
	for _, c := range cases {
		if r := c.Run(context.Background(), tg); !r.Skipped || !strings.Contains(r.Seen, "KAFKA_BROKERS") {
			t.Errorf("%s: %+v, want skipped with the API's reason", c.Name, r)
		}
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
