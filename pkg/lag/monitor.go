package lag

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
)

// Defaults of Config.
const (
	DefaultMinInterval = time.Second
	DefaultTimeout     = 3 * time.Second
	DefaultTick        = time.Second
	DefaultWindow      = 10 * time.Second
)

// Config says which group to watch and how often.
type Config struct {
	Brokers []string
	// Group is the consumer group; with pkg/messaging it is also the
	// consumer label of the consumer_* counters.
	Group string
	Topic string
	// MinInterval is the youngest a sample must be to be reused: scrapes and
	// /admin/lag calls within it share one measurement. Default 1 s.
	MinInterval time.Duration
	// Timeout bounds one measurement. Default 3 s.
	Timeout time.Duration
	// Tick is how often the rate sampler reads the consumer counters, and
	// Window the span the rates are averaged over. Defaults 1 s and 10 s.
	Tick   time.Duration
	Window time.Duration
}

func (c Config) withDefaults() Config {
	if c.MinInterval <= 0 {
		c.MinInterval = DefaultMinInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Tick <= 0 {
		c.Tick = DefaultTick
	}
	if c.Window < c.Tick {
		c.Window = max(DefaultWindow, c.Tick)
	}
	return c
}

// Validate reports a configuration the monitor cannot work with.
func (c Config) Validate() error {
	if len(c.Brokers) == 0 || c.Group == "" || c.Topic == "" {
		return errors.New("lag monitor: brokers, group and topic are required")
	}
	return nil
}

// Monitor watches one consumer group: it measures the group's lag on
// demand, at most once per MinInterval however many scrapes ask, and keeps
// a sliding window of the consumer's counters for the rates. Run owns its
// sampler goroutine and its broker client.
type Monitor struct {
	cfg      Config
	meter    *Meter
	meterErr error
	// counters holds the consumer's metrics only (see Registerer), so the
	// rate sampler reads them without running the service's other
	// collectors, some of which query a database.
	counters *prometheus.Registry
	service  prometheus.Registerer

	flight singleflight.Group
	mu     sync.Mutex
	last   Sample
	lastAt time.Time
	err    error
	window window

	lagDesc, totalDesc, ageDesc *prometheus.Desc
}

// NewMonitor returns a monitor of cfg's group and registers its gauges
// with reg: consumer_lag{group,partition}, consumer_lag_total{group} and
// consumer_oldest_unprocessed_age_seconds{group}. A configuration problem
// is reported by Run, so a service can wire the monitor in one line.
func NewMonitor(cfg Config, reg prometheus.Registerer) *Monitor {
	cfg = cfg.withDefaults()
	m := &Monitor{
		cfg:      cfg,
		counters: prometheus.NewRegistry(),
		service:  reg,
		lagDesc: prometheus.NewDesc("consumer_lag",
			"Messages of the partition the group has not committed yet.", []string{"group", "partition"}, nil),
		totalDesc: prometheus.NewDesc("consumer_lag_total",
			"Messages of the topic the group has not committed yet.", []string{"group"}, nil),
		ageDesc: prometheus.NewDesc("consumer_oldest_unprocessed_age_seconds",
			"Age of the oldest message the group has not committed yet (0 without lag).", []string{"group"}, nil),
	}
	if m.meterErr = cfg.Validate(); m.meterErr == nil {
		m.meter, m.meterErr = NewMeter(cfg.Brokers)
	}
	reg.MustRegister(m)
	return m
}

// Registerer is where the consumer's pkg/messaging metrics should be
// registered: it registers them with the service's registry and also
// keeps them for the monitor, whose rates are derived from them.
func (m *Monitor) Registerer() prometheus.Registerer {
	return tee{service: m.service, counters: m.counters}
}

// Run samples the consumer counters every Tick until ctx ends, then
// closes the broker client. It returns the configuration error, if any.
func (m *Monitor) Run(ctx context.Context) error {
	if m.meterErr != nil {
		return m.meterErr
	}
	defer m.meter.Close()
	m.tick(time.Now())
	t := time.NewTicker(m.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			m.tick(now)
		}
	}
}

// tick records the consumer counters as they are at now.
func (m *Monitor) tick(now time.Time) {
	families, err := m.counters.Gather()
	if err != nil {
		return // a collector failed; the next tick tries again
	}
	p := readCounters(families, m.cfg.Group)
	p.at = now
	m.mu.Lock()
	m.window.add(p, m.cfg.Window)
	m.mu.Unlock()
}

// Sample returns the group's lag, measured at most MinInterval ago. Callers
// arriving while a measurement runs wait for it instead of starting their
// own; a failed measurement is also reused for MinInterval, so a broker
// outage costs one timeout per interval, not one per scrape.
func (m *Monitor) Sample(ctx context.Context) (Sample, error) {
	if m.meterErr != nil {
		return Sample{}, m.meterErr
	}
	m.mu.Lock()
	if !m.lastAt.IsZero() && time.Since(m.lastAt) < m.cfg.MinInterval {
		s, err := m.last, m.err
		m.mu.Unlock()
		return s, err
	}
	m.mu.Unlock()
	ch := m.flight.DoChan("sample", func() (any, error) {
		// A measurement that finished while this caller was deciding
		// counts: at most one per MinInterval.
		m.mu.Lock()
		if !m.lastAt.IsZero() && time.Since(m.lastAt) < m.cfg.MinInterval {
			s, err := m.last, m.err
			m.mu.Unlock()
			return s, err
		}
		m.mu.Unlock()
		// Detached from the first caller: the others wait for it too.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Timeout)
		defer cancel()
		s, err := m.meter.Measure(mctx, m.cfg.Group, m.cfg.Topic)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.lastAt, m.err = time.Now(), err
		if err == nil {
			m.last = s
			m.window.addOffsets(offsetPoint{at: s.SampledAt, end: s.EndOffsets}, m.cfg.Window)
		}
		return s, err
	})
	select {
	case <-ctx.Done():
		return Sample{}, fmt.Errorf("lag of group %s: %w", m.cfg.Group, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return Sample{}, r.Err
		}
		return r.Val.(Sample), nil
	}
}

// Rates returns the consumer's rates over the window.
func (m *Monitor) Rates() Rates {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.window.rates()
}

// Describe implements prometheus.Collector.
func (m *Monitor) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.lagDesc
	ch <- m.totalDesc
	ch <- m.ageDesc
}

// Collect implements prometheus.Collector. When the broker cannot be
// measured the gauges are left out of the scrape, rather than reported as
// 0 (which would read as "caught up") or failing the whole scrape.
func (m *Monitor) Collect(ch chan<- prometheus.Metric) {
	s, err := m.Sample(context.Background())
	if err != nil {
		return
	}
	for _, p := range s.Partitions {
		ch <- prometheus.MustNewConstMetric(m.lagDesc, prometheus.GaugeValue, float64(p.Lag),
			s.Group, strconv.Itoa(int(p.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(m.totalDesc, prometheus.GaugeValue, float64(s.TotalLag), s.Group)
	ch <- prometheus.MustNewConstMetric(m.ageDesc, prometheus.GaugeValue, s.OldestAge.Seconds(), s.Group)
}

// tee registers collectors with the service's registry and the monitor's.
type tee struct {
	service  prometheus.Registerer
	counters *prometheus.Registry
}

func (t tee) Register(c prometheus.Collector) error {
	if err := t.service.Register(c); err != nil {
		return err
	}
	if err := t.counters.Register(c); err != nil {
		t.service.Unregister(c)
		return fmt.Errorf("lag monitor: %w", err)
	}
	return nil
}

// MustRegister panics on the first failure, as prometheus.Registerer's
// contract asks.
func (t tee) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := t.Register(c); err != nil {
			panic(err)
		}
	}
}

func (t tee) Unregister(c prometheus.Collector) bool {
	t.counters.Unregister(c)
	return t.service.Unregister(c)
}
