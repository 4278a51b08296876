package lag_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// monitored is a monitor registered on an Echo server and a registry, and
// running until the test ends.
type monitored struct {
	mon *lag.Monitor
	reg *prometheus.Registry
	url string
}

func startMonitor(t *testing.T, cfg lag.Config) *monitored {
	t.Helper()
	reg := prometheus.NewRegistry()
	api := httpapi.New(httpapi.Config{Registry: reg}, slog.New(slog.DiscardHandler))
	mon := lag.Register(api.Admin(), reg, cfg)
	srv := httptest.NewServer(api.Echo)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after the context ended", err)
		}
	})
	return &monitored{mon: mon, reg: reg, url: srv.URL}
}

// gauges returns the values of the named family by label set, written as
// "group=g,partition=1".
func (m *monitored) gauges(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			out[labels(mt)] = mt.GetGauge().GetValue()
		}
	}
	return out
}

func (m *monitored) has(t *testing.T, name string) bool {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return true
		}
	}
	return false
}

func labels(m *dto.Metric) string {
	var s string
	for i, l := range m.GetLabel() {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + "=" + l.GetValue()
	}
	return s
}

func (m *monitored) report(t *testing.T) (int, lag.Report) {
	t.Helper()
	resp, err := http.Get(m.url + "/admin/lag")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r lag.Report
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
	}
	return resp.StatusCode, r
}

func TestMonitorServesGaugesAndReport(t *testing.T) {
	c := startCluster(t)
	c.produce(t, records)
	group := postgrestest.UniqueName("group")
	join(t, c, group, records).commit(t, map[int32]int64{0: 13})
	m := startMonitor(t, lag.Config{Brokers: c.brokers, Group: group, Topic: c.topic})

	perPartition := m.gauges(t, "consumer_lag")
	want := map[string]float64{
		"group=" + group + ",partition=0": 0,
		"group=" + group + ",partition=1": 13,
		"group=" + group + ",partition=2": 12,
		"group=" + group + ",partition=3": 12,
	}
	if len(perPartition) != len(want) {
		t.Fatalf("consumer_lag = %v, want %v", perPartition, want)
	}
	for k, v := range want {
		if perPartition[k] != v {
			t.Errorf("consumer_lag{%s} = %v, want %v", k, perPartition[k], v)
		}
	}
	if got := m.gauges(t, "consumer_lag_total")["group="+group]; got != 37 {
		t.Errorf("consumer_lag_total = %v, want 37", got)
	}
	if got := m.gauges(t, "consumer_oldest_unprocessed_age_seconds")["group="+group]; got < 3500 {
		t.Errorf("consumer_oldest_unprocessed_age_seconds = %v, want the age of record 1 (about an hour)", got)
	}

	code, r := m.report(t)
	if code != http.StatusOK {
		t.Fatalf("GET /admin/lag = %d", code)
	}
	if r.Group != group || r.Topic != c.topic || len(r.Partitions) != partitions || r.TotalLag != 37 || r.OldestAgeSeconds < 3500 {
		t.Errorf("report = %+v, want group %s, topic %s, 4 partitions, total lag 37, oldest about an hour", r, group, c.topic)
	}
}

func TestMonitorMeasuresAtMostOncePerInterval(t *testing.T) {
	c := startCluster(t)
	c.produce(t, 10)
	m := startMonitor(t, lag.Config{Brokers: c.brokers, Group: "g", Topic: c.topic, MinInterval: time.Hour})
	ctx := context.Background()
	first, err := m.mon.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.produce(t, 10)
	for range 5 { // a scrape burst
		m.gauges(t, "consumer_lag_total")
	}
	again, err := m.mon.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !again.SampledAt.Equal(first.SampledAt) || again.TotalLag != 10 {
		t.Errorf("second sample at %v with lag %d, want the first one (%v, lag 10) reused within the interval",
			again.SampledAt, again.TotalLag, first.SampledAt)
	}
}

func TestMonitorWithoutBrokerAnswersUnavailable(t *testing.T) {
	c := startCluster(t)
	m := startMonitor(t, lag.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g", Topic: c.topic, Timeout: 200 * time.Millisecond})
	if code, _ := m.report(t); code != http.StatusServiceUnavailable {
		t.Errorf("GET /admin/lag without a broker = %d, want 503", code)
	}
	if got := m.gauges(t, "consumer_lag_total"); len(got) != 0 {
		t.Errorf("consumer_lag_total without a broker = %v, want left out of the scrape", got)
	}
}

func TestMonitorRunRejectsAnIncompleteConfig(t *testing.T) {
	mon := lag.NewMonitor(lag.Config{Group: "g", Topic: "t"}, prometheus.NewRegistry())
	if err := mon.Run(context.Background()); err == nil {
		t.Fatal("Run without brokers = nil, want an error")
	}
}

// consumerCounters stand in for pkg/messaging's metrics (same names and
// labels), which only its router can move.
type consumerCounters struct {
	messages, retries, dead *prometheus.CounterVec
	duration                *prometheus.HistogramVec
}

func newConsumerCounters(reg prometheus.Registerer) *consumerCounters {
	c := &consumerCounters{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "consumer_messages_total"}, []string{"consumer", "outcome"}),
		retries:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "consumer_retries_total"}, []string{"consumer"}),
		dead:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "consumer_dead_letters_total"}, []string{"consumer", "error_class"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "consumer_handler_duration_seconds",
			Buckets: []float64{0.001, 0.01, 0.1}}, []string{"consumer"}),
	}
	reg.MustRegister(c.messages, c.retries, c.dead, c.duration)
	return c
}

func TestMonitorRatesComeFromTheConsumerCounters(t *testing.T) {
	c := startCluster(t)
	// A window far longer than the test: its left edge stays the first
	// tick, before any increment, so the rates' ratios are exact.
	m := startMonitor(t, lag.Config{Brokers: c.brokers, Group: "inventory-service", Topic: c.topic,
		Tick: 10 * time.Millisecond, Window: time.Hour})
	counters := newConsumerCounters(m.mon.Registerer())
	poll.Until(t, timeout, "two ticks of the sampler", func() bool { return m.mon.Rates().Window > 0 })

	counters.messages.WithLabelValues("inventory-service", "ok").Add(60)
	counters.messages.WithLabelValues("inventory-service", "rejected").Add(6)
	counters.messages.WithLabelValues("inventory-service", "error").Add(100) // failed runs: not consumed
	counters.messages.WithLabelValues("points-service", "ok").Add(100)       // another consumer
	counters.retries.WithLabelValues("inventory-service").Add(11)
	counters.dead.WithLabelValues("inventory-service", "PERMANENT").Add(11)
	for range 10 {
		counters.duration.WithLabelValues("inventory-service").Observe(0.005)
	}
	var r lag.Rates
	poll.Until(t, timeout, "the sampler to see every increment", func() bool {
		r = m.mon.Rates()
		return r.Consumed > 0 && math.Abs(r.Consumed/r.Retries-6) < 1e-9 && r.DeadLetters == r.Retries
	})
	if r.HandlerP50 <= time.Millisecond || r.HandlerP99 > 10*time.Millisecond {
		t.Errorf("handler p50 %v, p99 %v; want both within the (1ms, 10ms] bucket", r.HandlerP50, r.HandlerP99)
	}
	if !m.has(t, "consumer_messages_total") {
		t.Error("the consumer counters registered through Registerer are missing from the service's registry")
	}
}

func TestQuantileInterpolatesWithinBuckets(t *testing.T) {
	uppers := []float64{1, 2, 4}
	tests := []struct {
		name   string
		q      float64
		counts []float64 // cumulative, then the total
		want   float64
	}{
		{"nothing observed", 0.5, []float64{0, 0, 0, 0}, 0},
		{"all in the first bucket", 0.5, []float64{10, 10, 10, 10}, 0.5},
		{"median in the second", 0.5, []float64{2, 8, 10, 10}, 1 + 3.0/6},
		{"p99 in the last finite", 0.99, []float64{0, 0, 100, 100}, 2 + 2*0.99},
		{"beyond every bound", 0.99, []float64{0, 0, 0, 5}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lag.Quantile(tt.q, uppers, tt.counts); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("Quantile(%v, %v) = %v, want %v", tt.q, tt.counts, got, tt.want)
			}
		})
	}
}
