package adapters

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// backlogQueryTimeout bounds the backlog query of one scrape, so a slow
// database cannot hang /metrics.
const backlogQueryTimeout = 2 * time.Second

// BacklogCollector exposes the outbox backlog (docs/design.md, Lag and age
// metrics: outbox pending count and oldest pending age). It measures at
// scrape time with one query, so the figures are never staler than the
// scrape and no goroutine polls.
type BacklogCollector struct {
	db      *sqlx.DB
	logger  *slog.Logger
	pending *prometheus.Desc
	oldest  *prometheus.Desc
}

// NewBacklogCollector returns a collector over db's outbox; register it
// with the service's registry.
func NewBacklogCollector(db *sqlx.DB, logger *slog.Logger) *BacklogCollector {
	return &BacklogCollector{
		db:     db,
		logger: logger,
		pending: prometheus.NewDesc("outbox_pending_events",
			"Outbox rows not yet delivered to the broker.", nil, nil),
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
	b, err := outbox.PendingBacklog(ctx, c.db)
	if err != nil {
		c.logger.WarnContext(ctx, "outbox backlog metrics unavailable", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(b.Pending))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, b.OldestAge.Seconds())
}
