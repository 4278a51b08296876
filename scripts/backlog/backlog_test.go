package backlog_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
)

const exposition = `# HELP consumer_messages_total Messages handled, by outcome.
# TYPE consumer_messages_total counter
consumer_messages_total{consumer="inventory-service",outcome="ok"} 90
consumer_messages_total{consumer="inventory-service",outcome="rejected"} 10
consumer_messages_total{consumer="inventory-service",outcome="error"} 4
consumer_messages_total{consumer="other",outcome="ok"} 1000
# TYPE consumer_retries_total counter
consumer_retries_total{consumer="inventory-service"} 3
# TYPE consumer_dead_letters_total counter
consumer_dead_letters_total{consumer="inventory-service",error_class="poison"} 1
consumer_dead_letters_total{consumer="inventory-service",error_class="retry_exhausted"} 2
# TYPE consumer_handler_duration_seconds histogram
consumer_handler_duration_seconds_bucket{consumer="inventory-service",le="0.01"} 50
consumer_handler_duration_seconds_bucket{consumer="inventory-service",le="0.1"} 90
consumer_handler_duration_seconds_bucket{consumer="inventory-service",le="+Inf"} 100
consumer_handler_duration_seconds_sum{consumer="inventory-service"} 3.5
consumer_handler_duration_seconds_count{consumer="inventory-service"} 100
# TYPE consumer_batch_size histogram
consumer_batch_size_bucket{consumer="inventory-service",le="+Inf"} 4
consumer_batch_size_sum{consumer="inventory-service"} 100
consumer_batch_size_count{consumer="inventory-service"} 4
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.2e+07
`

func TestParseMetrics(t *testing.T) {
	m, err := backlog.ParseMetrics(exposition, "inventory-service")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		got, want float64
	}{
		{"consumed (ok + rejected of this consumer)", m.Consumed, 100},
		{"retries", m.Retries, 3},
		{"dead letters (every class)", m.DeadLetters, 3},
		{"rss", m.RSS, 42e6},
		{"handler bucket 0.01", m.HandlerBuckets[0.01], 50},
		{"handler bucket +Inf (the count)", m.HandlerBuckets[math.Inf(1)], 100},
		{"batch sum", m.BatchSum, 100},
		{"batch count", m.BatchCount, 4},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if _, err := backlog.ParseMetrics("consumer_messages_total{", "x"); err == nil {
		t.Error("a broken exposition parsed")
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name    string
		q       float64
		buckets map[float64]float64
		want    float64
	}{
		{"empty", 0.5, map[float64]float64{}, 0},
		{"no observations", 0.99, map[float64]float64{0.1: 0, inf: 0}, 0},
		{"inside the first bucket", 0.5, map[float64]float64{0.1: 100, inf: 100}, 0.05},
		{"inside a later bucket", 0.5, map[float64]float64{0.1: 20, 0.2: 60, inf: 60}, 0.125},
		{"in the +Inf bucket: the highest bound", 0.99, map[float64]float64{0.1: 10, inf: 100}, 0.1},
	}
	for _, tt := range tests {
		if got := backlog.Quantile(tt.q, tt.buckets); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: Quantile(%v) = %v, want %v", tt.name, tt.q, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     backlog.Config
		wantErr string
	}{
		{"defaults", backlog.Config{RunID: "b1"}, ""},
		{"small run", backlog.Config{RunID: "b1", Count: 2000, Instances: 3, Interval: 250 * time.Millisecond}, ""},
		{"too many instances", backlog.Config{RunID: "b1", Instances: 13}, "--instances 13"},
		{"negative delay", backlog.Config{RunID: "b1", ScaleAfter: -time.Second}, "--scale-after"},
		{"interval too short", backlog.Config{RunID: "b1", Interval: time.Millisecond}, "--interval"},
		{"unknown service", backlog.Config{RunID: "b1", Services: []string{"order"}}, `--services: "order"`},
		{"bad run id", backlog.Config{RunID: "b 1"}, "--run-id"},
		{"negative count", backlog.Config{RunID: "b1", Count: -5}, "--count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}

// samples is a small run: inventory's lag rises to 300 then drains after a
// scale-out at 2 s, consuming 50/s before and 150/s after.
func samples() []backlog.Sample {
	consumed := []float64{0, 50, 100, 250, 400, 550}
	lag := []int64{0, 250, 300, 150, 50, 0}
	var out []backlog.Sample
	for i := range consumed {
		rate := 0.0
		if i > 0 {
			rate = consumed[i] - consumed[i-1]
		}
		members := []backlog.Member{{Instance: "inventory", Partitions: []int32{0, 1}}}
		if i >= 3 {
			members = []backlog.Member{{Instance: "inventory", Partitions: []int32{0}}, {Instance: "inventory#2", Partitions: []int32{1}}}
		}
		out = append(out, backlog.Sample{
			Elapsed: float64(i), Published: 550,
			Groups: []backlog.GroupSample{{
				Service: "inventory", Group: "inventory-service", Lag: lag[i], PartitionLag: []int64{lag[i] / 2, lag[i] - lag[i]/2},
				OldestAge: float64(i) / 2, Consumed: consumed[i], ConsumedPerSecond: rate, HandlerP99: 0.01 * float64(i),
				Instances: []backlog.InstanceSample{{Name: "inventory", RSS: float64(30+i) * (1 << 20)}}, Members: members,
				GroupState: "Stable",
			}},
			Connections:       []backlog.Connections{{Database: "inventory", Open: 5 + i, InUse: i % 3}},
			ServerConnections: 40 + i,
		})
	}
	return out
}

func TestBuildReport(t *testing.T) {
	cfg := backlog.Config{RunID: "b1", Count: 550, Instances: 2, Services: []string{"inventory"}}
	r := backlog.BuildReport(cfg, samples(), backlog.Moments{PublishEnd: 1, ScaleRequested: 2, ScaleReady: 2.5, Rebalanced: 3, Drained: 5})
	if len(r.Groups) != 1 {
		t.Fatalf("groups: %+v", r.Groups)
	}
	g := r.Groups[0]
	tests := []struct {
		name      string
		got, want float64
	}{
		{"peak lag", float64(g.PeakLag), 300},
		{"peak lag at", g.PeakLagAt, 2},
		{"peak oldest age", g.PeakOldestAge, 2.5},
		{"consumed/s before the scale-out (0 s → 2 s)", g.Before, 50},
		{"consumed/s after it (settled 3 s → drained 5 s)", g.After, 150},
		{"peak consumed/s", g.Peak, 150},
		{"handler p99 max", g.HandlerP99Max, 0.05},
		{"peak RSS", g.PeakRSS, 35 << 20},
		{"peak RSS at", g.PeakRSSAt, 5},
		{"peak connections open", float64(r.Connections[0].PeakOpen), 10},
		{"peak connections in use", float64(r.Connections[0].PeakInUse), 2},
		{"peak server connections", float64(r.PeakServerConnections), 45},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if len(g.Assignment) != 2 || g.Assignment[1].Instance != "inventory#2" {
		t.Errorf("assignment at the end: %+v", g.Assignment)
	}
	for _, c := range r.Checks {
		if !c.Pass {
			t.Errorf("check %s failed: %s", c.Name, c.Got)
		}
	}

	// A partition owned by two members at once fails the ownership check;
	// no drain fails the drained check.
	bad := samples()
	bad[4].Groups[0].Members = append(bad[4].Groups[0].Members, backlog.Member{ClientHost: "127.0.0.1:5000", Partitions: []int32{1}})
	r = backlog.BuildReport(cfg, bad, backlog.Moments{PublishEnd: 1, ScaleRequested: 2, ScaleReady: -1, Rebalanced: -1, Drained: -1})
	failed := map[string]string{}
	for _, c := range r.Checks {
		if !c.Pass {
			failed[c.Name] = c.Got
		}
	}
	if !strings.Contains(failed["one owner per partition"], "partition 1 owned by inventory#2 and 127.0.0.1:5000 at 4.0s") {
		t.Errorf("ownership check: %q", failed["one owner per partition"])
	}
	if _, ok := failed["drained"]; !ok {
		t.Error("the drained check passed without a drain")
	}
	if _, ok := failed["scaled out"]; !ok {
		t.Error("the scaled-out check passed without a settled group")
	}
}

// TestReportSaysWhenTheCPUIsTheLimit: the machine's busy share is
// averaged over the windows of the before and after rates (samples at 1 s
// and 2 s; 4 s and 5 s), and a machine at least 90 % busy after the
// scale-out is named as the limit.
func TestReportSaysWhenTheCPUIsTheLimit(t *testing.T) {
	cfg := backlog.Config{RunID: "b1", Count: 550, Instances: 2, Services: []string{"inventory"}}
	moments := backlog.Moments{PublishEnd: 1, ScaleRequested: 2, ScaleReady: 2.5, Rebalanced: 3, Drained: 5}
	tests := []struct {
		name               string
		busy               []float64 // by sample; negative: not measured
		wantBefore, wantAf float64
		wantLimit          string
	}{
		{"saturated after the scale-out", []float64{-1, 0.8, 0.9, 0.9, 0.94, 0.98}, 0.85, 0.96, "cpu"},
		{"room to spare", []float64{-1, 0.4, 0.5, 0.6, 0.5, 0.7}, 0.45, 0.6, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			smp := samples()
			for i, b := range tt.busy {
				if b >= 0 {
					smp[i].CPUBusy = &b
				}
			}
			r := backlog.BuildReport(cfg, smp, moments)
			if r.CPUBefore == nil || r.CPUAfter == nil || math.Abs(*r.CPUBefore-tt.wantBefore) > 1e-9 || math.Abs(*r.CPUAfter-tt.wantAf) > 1e-9 {
				t.Fatalf("busy before %v after %v, want %v and %v", r.CPUBefore, r.CPUAfter, tt.wantBefore, tt.wantAf)
			}
			if r.Limit != tt.wantLimit {
				t.Errorf("limit %q, want %q", r.Limit, tt.wantLimit)
			}
			var table strings.Builder
			if err := backlog.WriteTable(&table, r); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(table.String(), "the CPU, not the consumers"); got != (tt.wantLimit == "cpu") {
				t.Errorf("the table names the CPU as the limit: %v, want %v:\n%s", got, tt.wantLimit == "cpu", table.String())
			}
		})
	}
	if r := backlog.BuildReport(cfg, samples(), moments); r.CPUBefore != nil || r.CPUAfter != nil || r.Limit != "" {
		t.Errorf("without CPU samples the report still gives busy %v / %v, limit %q", r.CPUBefore, r.CPUAfter, r.Limit)
	}
}

func TestSettled(t *testing.T) {
	cfg := backlog.Config{RunID: "b1", Instances: 2, Services: []string{"inventory"}}
	s := samples()
	tests := []struct {
		name   string
		sample backlog.Sample
		want   bool
	}{
		{"one member", s[1], false},
		{"two members, each with a partition", s[4], true},
	}
	rebalancing := s[4]
	rebalancing.Groups = []backlog.GroupSample{s[4].Groups[0]}
	rebalancing.Groups[0].GroupState = "PreparingRebalance"
	tests = append(tests, struct {
		name   string
		sample backlog.Sample
		want   bool
	}{"rebalancing", rebalancing, false})
	for _, tt := range tests {
		if got := backlog.Settled(cfg, tt.sample); got != tt.want {
			t.Errorf("%s: settled = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestWriteTableAndHTML(t *testing.T) {
	cfg := backlog.Config{RunID: "b1", Count: 550, Instances: 2, Services: []string{"inventory"}}
	r := backlog.BuildReport(cfg, samples(), backlog.Moments{PublishEnd: 1, ScaleRequested: 2, ScaleReady: 2.5, Rebalanced: 3, Drained: 5})
	r.Pass = true
	var table strings.Builder
	if err := backlog.WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"time to drain  5.0s", "peak lag", "300", "inventory: 0  inventory#2: 1", "verdict: PASS"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var page strings.Builder
	if err := backlog.WriteHTML(&page, r, samples()); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if n := strings.Count(html, "<svg"); n != 5 {
		t.Errorf("%d charts, want 5 (lag, oldest age, throughput, memory, connections)", n)
	}
	if n := strings.Count(html, ">scale-out to 2</text>"); n != 5 {
		t.Errorf("the scale-out is marked on %d charts, want 5", n)
	}
	for _, external := range []string{"http://", "https://", "<script", "<link", "src="} {
		if strings.Contains(html, external) {
			t.Errorf("the page is not self-contained: it has %q", external)
		}
	}
}

func TestProgressLine(t *testing.T) {
	cfg := backlog.Config{RunID: "b1", Count: 100000}
	s := samples()[2]
	s.Published = 45000
	want := "[   2.0s] published 45 000/100 000 | lag inv 300 | oldest 1.0s | consumed/s inv 50 | instances 1"
	if got := backlog.ProgressLine(cfg, s); got != want {
		t.Errorf("line\n got %q\nwant %q", got, want)
	}
}

func TestFormatCount(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1 000"}, {100000, "100 000"}, {1234567.4, "1 234 567"}, {-1, "-1"}}
	for _, tt := range tests {
		if got := backlog.FormatCount(tt.v); got != tt.want {
			t.Errorf("count(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// The control API client scales through POST /services/{name}/scale and
// lists a service's running processes from GET /services.
func TestControlClient(t *testing.T) {
	var mu sync.Mutex
	var scaled []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/services/inventory/scale":
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			scaled = append(scaled, string(body))
			mu.Unlock()
			if _, err := w.Write([]byte(`{"service":"inventory","instances":[]}`)); err != nil {
				t.Error(err)
			}
		case r.Method == "POST":
			w.WriteHeader(http.StatusBadRequest)
			if _, err := w.Write([]byte(`{"error":"payment: not a consumer service"}`)); err != nil {
				t.Error(err)
			}
		case r.URL.Path == "/services":
			if err := json.NewEncoder(w).Encode(map[string]any{"services": []map[string]any{
				{"name": "inventory", "service": "inventory", "state": "running", "url": "http://127.0.0.1:8083", "pid": 10},
				{"name": "inventory#2", "service": "inventory", "state": "running", "url": "http://127.0.0.1:8183", "pid": 11},
				{"name": "inventory#3", "service": "inventory", "state": "starting", "url": "http://127.0.0.1:8283", "pid": 12},
				{"name": "points", "service": "points", "state": "running", "url": "http://127.0.0.1:8084", "pid": 13},
			}}); err != nil {
				t.Error(err)
			}
		}
	}))
	defer srv.Close()
	c := backlog.NewControlClient(srv.URL)
	ctx := context.Background()
	if err := c.Scale(ctx, "inventory", 6); err != nil {
		t.Fatal(err)
	}
	if len(scaled) != 1 || scaled[0] != `{"instances":6}` {
		t.Errorf("scale requests: %q", scaled)
	}
	if err := c.Scale(ctx, "payment", 2); err == nil || !strings.Contains(err.Error(), "not a consumer service") {
		t.Errorf("Scale(payment) = %v, want the API's error", err)
	}
	got, err := c.Instances(ctx, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	want := []backlog.Instance{{Name: "inventory", URL: "http://127.0.0.1:8083", PID: 10}, {Name: "inventory#2", URL: "http://127.0.0.1:8183", PID: 11}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Instances = %+v, want %+v (a starting one left out)", got, want)
	}
	if _, err := c.Instances(ctx, "notification"); err == nil {
		t.Error("Instances of a service without processes succeeded")
	}
}

// A member's client address from the embedded broker names the process
// that owns the connection.
func TestSocketOwner(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("socket owners come from /proc")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	local := conn.LocalAddr().String()
	if port := backlog.ClientPort(local); port != conn.LocalAddr().(*net.TCPAddr).Port {
		t.Fatalf("ClientPort(%q) = %d", local, port)
	}
	if pid, ok := backlog.SocketOwner(backlog.ClientPort(local), []int{os.Getppid(), os.Getpid()}); !ok || pid != os.Getpid() {
		t.Errorf("SocketOwner = %d, %v; want this process %d", pid, ok, os.Getpid())
	}
	if _, ok := backlog.SocketOwner(backlog.ClientPort(local), []int{os.Getppid()}); ok {
		t.Error("SocketOwner found the socket in another process")
	}
	if port := backlog.ClientPort("/127.0.0.1"); port != 0 {
		t.Errorf("ClientPort of a bare host = %d, want 0", port)
	}
}
