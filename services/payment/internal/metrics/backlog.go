// Package metrics exposes the callback outbox's backlog to Prometheus, so
// an operator sees callbacks piling up while the order service is down.
package metrics

import (
	"context"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// scrapeTimeout bounds the backlog query of one scrape.
const scrapeTimeout = 2 * time.Second

// Backlog is a collector that measures the outbox backlog at scrape time,
// with one query for both figures.
type Backlog struct {
	db      sqlx.QueryerContext
	pending *prometheus.Desc
	oldest  *prometheus.Desc
}

// NewBacklog returns a collector over db's outbox_events.
func NewBacklog(db sqlx.QueryerContext) *Backlog {
	return &Backlog{
		db: db,
		pending: prometheus.NewDesc("outbox_pending_events",
			"Outbox rows not yet delivered.", nil, nil),
		oldest: prometheus.NewDesc("outbox_oldest_pending_age_seconds",
			"Age of the oldest undelivered outbox row (0 when none).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (b *Backlog) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.pending
	ch <- b.oldest
}

// Collect implements prometheus.Collector. When the database does not
// answer, the figures are left out of the scrape rather than failing it, so
// the service's other metrics stay visible.
func (b *Backlog) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	backlog, err := outbox.PendingBacklog(ctx, b.db)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(b.pending, prometheus.GaugeValue, float64(backlog.Pending))
	ch <- prometheus.MustNewConstMetric(b.oldest, prometheus.GaugeValue, backlog.OldestAge.Seconds())
}
