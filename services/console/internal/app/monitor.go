package app

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// LagSuite is what the monitor reads; *suiteapi.Client is one.
type LagSuite interface {
	Lag(ctx context.Context, service string) (suiteapi.LagReport, error)
}

// MonitorConfig says how often the monitor samples and what it keeps.
type MonitorConfig struct {
	// Interval is the time between two samples of every consumer
	// (CONSOLE_SAMPLE_INTERVAL).
	Interval time.Duration
	// History is how many samples of each consumer are kept
	// (CONSOLE_SAMPLE_HISTORY).
	History int
	// Idle stops the sampling while nobody has looked for that long, so
	// an unwatched console costs the consumers nothing.
	Idle time.Duration
}

// DefaultMonitorConfig samples every 2 s, keeps 5 minutes and sleeps after
// a minute without a viewer.
func DefaultMonitorConfig() MonitorConfig {
	return MonitorConfig{Interval: 2 * time.Second, History: 150, Idle: time.Minute}
}

// Sample is one consumer's backlog at one moment (GET /admin/lag): the
// tutorial's lag, oldest unprocessed age and throughput.
type Sample struct {
	At                   time.Time `json:"at"`
	TotalLag             int64     `json:"totalLag"`
	OldestAgeSeconds     float64   `json:"oldestAgeSeconds"`
	ConsumedPerSecond    float64   `json:"consumedPerSecond"`
	ProducedPerSecond    float64   `json:"producedPerSecond"`
	RetriesPerSecond     float64   `json:"retriesPerSecond"`
	DeadLettersPerSecond float64   `json:"deadLettersPerSecond"`
	// Error is why the consumer did not answer; the figures are zero.
	Error string `json:"error,omitempty"`
}

// Series is one consumer's samples, oldest first.
type Series struct {
	Service string   `json:"service"`
	Samples []Sample `json:"samples"`
}

// Monitor samples every consumer's lag while someone watches and keeps
// the last samples of each, for the charts.
type Monitor struct {
	suite LagSuite
	cfg   MonitorConfig
	now   func() time.Time
	wake  chan struct{}

	mu      sync.Mutex
	series  map[string][]Sample
	watched time.Time
}

// NewMonitor returns a monitor of suite's consumers; Run samples.
func NewMonitor(cfg MonitorConfig, suite LagSuite) *Monitor {
	return &Monitor{suite: suite, cfg: cfg, now: time.Now, wake: make(chan struct{}, 1), series: map[string][]Sample{}}
}

// Run samples every Interval while the charts were looked at within Idle,
// until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if m.watchedWithin(m.cfg.Idle) {
			m.sample(ctx)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.wake:
		}
	}
}

func (m *Monitor) watchedWithin(d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.watched.IsZero() && m.now().Sub(m.watched) < d
}

// sample reads every consumer once, side by side.
func (m *Monitor) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Interval)
	defer cancel()
	var g errgroup.Group
	for _, svc := range Consumers {
		g.Go(func() error {
			r, err := m.suite.Lag(ctx, svc)
			s := Sample{At: m.now().UTC()}
			if err != nil {
				s.Error = err.Error()
			} else {
				s.TotalLag, s.OldestAgeSeconds = r.TotalLag, r.OldestAgeSeconds
				s.ConsumedPerSecond, s.ProducedPerSecond = r.ConsumedPerSecond, r.ProducedPerSecond
				s.RetriesPerSecond, s.DeadLettersPerSecond = r.RetriesPerSecond, r.DeadLettersPerSecond
			}
			m.add(svc, s)
			return nil
		})
	}
	_ = g.Wait()
}

func (m *Monitor) add(svc string, s Sample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.series[svc]
	list = append(list, s)
	if over := len(list) - m.cfg.History; over > 0 {
		list = append([]Sample(nil), list[over:]...)
	}
	m.series[svc] = list
}

// Watch returns every consumer's samples, in the order of Consumers, and
// keeps the sampling going; the first look after a pause starts it at
// once.
func (m *Monitor) Watch() []Series {
	m.mu.Lock()
	idle := m.watched.IsZero() || m.now().Sub(m.watched) >= m.cfg.Idle
	m.watched = m.now()
	out := make([]Series, len(Consumers))
	for i, svc := range Consumers {
		out[i] = Series{Service: svc, Samples: append([]Sample{}, m.series[svc]...)}
	}
	m.mu.Unlock()
	if idle {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	return out
}
