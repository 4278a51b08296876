package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
)

// RelayMetrics counts what the relay delivered and what failed.
type RelayMetrics struct {
	published prometheus.Counter
	failures  prometheus.Counter
}

// NewRelayMetrics registers the relay's counters with reg.
func NewRelayMetrics(reg prometheus.Registerer) *RelayMetrics {
	m := &RelayMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_relay_published_total", Help: "Outbox rows delivered to the sink.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_relay_failures_total", Help: "Outbox rows whose delivery failed and will be retried.",
		}),
	}
	reg.MustRegister(m.published, m.failures)
	return m
}

func (m *RelayMetrics) sent(n int) {
	if m != nil {
		m.published.Add(float64(n))
	}
}

func (m *RelayMetrics) failed(n int) {
	if m != nil {
		m.failures.Add(float64(n))
	}
}

// backlogQueryTimeout bounds the backlog query of one scrape, so a slow
// database cannot hang /metrics.
const backlogQueryTimeout = 2 * time.Second

// BacklogCollector exposes the outbox backlog as outbox_pending_events and
// outbox_oldest_pending_age_seconds. It measures at scrape time with one
// query, so the figures are never staler than the scrape and no goroutine
// polls.
type BacklogCollector struct {
	db      sqlx.QueryerContext
	logger  *slog.Logger
	pending *prometheus.Desc
	oldest  *prometheus.Desc
}

// NewBacklogCollector returns a collector over db's outbox; register it
// with the service's registry.
func NewBacklogCollector(db sqlx.QueryerContext, logger *slog.Logger) *BacklogCollector {
	return &BacklogCollector{
		db:     db,
		logger: logger,
		pending: prometheus.NewDesc("outbox_pending_events",
			"Outbox rows not yet delivered to the sink.", nil, nil),
		oldest: prometheus.NewDesc("outbox_oldest_pending_age_seconds",
			"Age of the oldest undelivered outbox row (0 when none waits).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *BacklogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.oldest
}

// Collect implements prometheus.Collector. When the database does not
// answer it reports nothing (an absent series alerts better than a false
// zero) rather than failing the whole scrape.
func (c *BacklogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), backlogQueryTimeout)
	defer cancel()
	b, err := PendingBacklog(ctx, c.db)
	if err != nil {
		c.logger.WarnContext(ctx, "outbox backlog metrics unavailable", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, b.OldestAge.Seconds())
}
