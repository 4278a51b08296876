package retention

import (
	"context"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/client_golang/prometheus"
)

// sizeQueryTimeout bounds the size query of one scrape, so a slow
// database cannot hang /metrics.
const sizeQueryTimeout = 2 * time.Second

// SizeCollector exposes the on-disk size of tables, their indexes and
// TOAST included, as db_table_size_bytes{table}, measured at scrape time
// from the catalogue (no table is scanned).
type SizeCollector struct {
	db     sqlx.QueryerContext
	logger *slog.Logger
	tables []string
	size   *prometheus.Desc
}

// NewSizeCollector returns a collector of tables' sizes in db; register it
// with the service's registry.
func NewSizeCollector(db sqlx.QueryerContext, logger *slog.Logger, tables ...string) *SizeCollector {
	return &SizeCollector{
		db:     db,
		logger: logger,
		tables: tables,
		size: prometheus.NewDesc("db_table_size_bytes",
			"Disk space of a table with its indexes and TOAST (pg_total_relation_size).", []string{"table"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *SizeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.size }

// Collect implements prometheus.Collector. When the database does not
// answer it reports nothing rather than failing the whole scrape; a table
// that does not exist has no series.
func (c *SizeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), sizeQueryTimeout)
	defer cancel()
	sizes, err := Sizes(ctx, c.db, c.tables...)
	if err != nil {
		c.logger.WarnContext(ctx, "table size metrics unavailable", "error", err)
		return
	}
	for table, bytes := range sizes {
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(bytes), table)
	}
}

// Sizes returns pg_total_relation_size of each table that exists in the
// current schema search path, by name.
func Sizes(ctx context.Context, db sqlx.QueryerContext, tables ...string) (map[string]int64, error) {
	rows, err := db.QueryxContext(ctx, `
		SELECT t.name, pg_total_relation_size(to_regclass(t.name))
		FROM unnest($1::text[]) AS t(name)
		WHERE to_regclass(t.name) IS NOT NULL`, pq.Array(tables))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sizes := make(map[string]int64, len(tables))
	for rows.Next() {
		var name string
		var bytes int64
		if err := rows.Scan(&name, &bytes); err != nil {
			return nil, err
		}
		sizes[name] = bytes
	}
	return sizes, rows.Err()
}
