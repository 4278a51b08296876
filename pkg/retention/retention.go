// Package retention keeps tables that grow with every event bounded: a
// Pruner deletes the rows past a table's keeping window in small batches,
// and a SizeCollector exposes the tables' sizes. The tables' owners say
// which rows may go (a Rule); this package only runs the rules.
package retention

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	// DefaultInterval is how often the rules run: often enough that a
	// pass finds at most minutes of expired rows, rarely enough that its
	// scans cost nothing next to the traffic.
	DefaultInterval = 5 * time.Minute
	// DefaultBatch is the most rows one DELETE removes: a statement of a
	// few milliseconds that holds its row locks no longer than a business
	// transaction does.
	DefaultBatch = 1000
	// MaxBatch bounds RETENTION_BATCH.
	MaxBatch = 10000
)

// Rule is one table's retention, written by the package that owns the
// table.
type Rule struct {
	// Table names the table in metrics (retention_deleted_rows_total).
	Table string
	// Keep is how long a row is kept; a row past it may be deleted.
	Keep time.Duration
	// Delete is one DELETE statement removing at most $2 rows past the
	// cutoff $1 (a timestamptz: now minus Keep). It must pick its rows
	// with FOR UPDATE SKIP LOCKED, so it never waits for a row the hot
	// path holds and the hot path waits at most for one batch.
	Delete string
}

// Config is how often and how much the Pruner deletes.
type Config struct {
	// Interval (RETENTION_INTERVAL) is the time between passes.
	Interval time.Duration
	// Batch (RETENTION_BATCH) is the most rows one statement deletes.
	Batch int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Validate reports every unusable setting, naming its variable; zero
// values take the defaults.
func (c Config) Validate() error {
	var errs []error
	if c.Interval != 0 && c.Interval < time.Second {
		errs = append(errs, fmt.Errorf("RETENTION_INTERVAL=%s: want 1s or more", c.Interval))
	}
	if c.Batch < 0 || c.Batch > MaxBatch {
		errs = append(errs, fmt.Errorf("RETENTION_BATCH=%d: want 1 to %d", c.Batch, MaxBatch))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Pruner runs its rules every Interval.
type Pruner struct {
	db      *sqlx.DB
	cfg     Config
	rules   []Rule
	deleted *prometheus.CounterVec
}

// New returns a Pruner over db's tables; it registers
// retention_deleted_rows_total{table} with reg.
func New(db *sqlx.DB, cfg Config, reg prometheus.Registerer, rules ...Rule) *Pruner {
	p := &Pruner{
		db:    db,
		cfg:   cfg.withDefaults(),
		rules: rules,
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retention_deleted_rows_total",
			Help: "Rows deleted because they were past their table's retention window.",
		}, []string{"table"}),
	}
	reg.MustRegister(p.deleted)
	for _, r := range rules {
		p.deleted.WithLabelValues(r.Table) // every table's series from the start
	}
	return p
}

// Prune runs every rule once, each in batches until fewer than a batch of
// rows is past its window, and returns the rows deleted by table. A rule
// that fails does not keep the others from running.
func (p *Pruner) Prune(ctx context.Context) (map[string]int64, error) {
	deleted := make(map[string]int64, len(p.rules))
	var errs []error
	for _, r := range p.rules {
		n, err := p.prune(ctx, r)
		deleted[r.Table] += n
		if err != nil {
			errs = append(errs, fmt.Errorf("retention of %s: %w", r.Table, err))
		}
	}
	return deleted, errors.Join(errs...)
}

func (p *Pruner) prune(ctx context.Context, r Rule) (int64, error) {
	cutoff := p.cfg.Now().Add(-r.Keep)
	var total int64
	for {
		// One statement per batch, outside any transaction: its locks
		// end with it.
		res, err := p.db.ExecContext(ctx, r.Delete, cutoff, p.cfg.Batch)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		p.deleted.WithLabelValues(r.Table).Add(float64(n))
		if n < int64(p.cfg.Batch) || ctx.Err() != nil {
			return total, nil
		}
	}
}

// Run prunes at once and then every Interval until ctx ends; a failed pass
// is reported to onError and tried again at the next tick. It returns nil.
func (p *Pruner) Run(ctx context.Context, onError func(error)) error {
	t := time.NewTicker(p.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
