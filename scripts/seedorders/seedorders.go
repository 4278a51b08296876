// Package seedorders writes many paid orders, some refunded in full and
// some in part, straight into the five services' databases, with every
// effect each service would hold for them once they converged: the
// payment and its refund, the deduction and the restock, the points earned
// and reversed, the notifications, the outboxes (every row SENT), the
// inboxes and the version guards. A reconciliation run over them compares
// every path and, as the effects agree, finds nothing. Driving that many
// orders through the services would take hours on a small machine
// (docs/benchmarks.md); the rows follow what a live suite writes for the
// same orders (see the SQL files).
//
// The statements are INSERT ... SELECT over generate_series, one per
// table, with the same bind parameters for all (sql/series.sql), in one
// transaction per database, which is analyzed afterwards. Remove deletes
// the rows again by their prefix.
package seedorders

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	// The driver sqlx.Open names.
	_ "github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

//go:embed sql/*.sql
var files embed.FS

// Config says what to seed.
type Config struct {
	// Prefix starts every seeded order id; the rest is the order's number
	// from 1 to Count. Remove deletes by it.
	Prefix string
	// Count is how many orders.
	Count int
	// RefundEvery: every RefundEvery-th order is refunded in full (its
	// goods back in stock) and the one after it refunded 40.00 of 100.00
	// with one item back; 0 refunds none.
	RefundEvery int
	// CreatedAt is when the first order was created; each next one a
	// millisecond later, each one's effects within 50 ms of it.
	CreatedAt time.Time
	// NoAnalyze leaves the planner's statistics of the written rows to
	// autovacuum instead of analyzing each database once it is written:
	// the conditions of the run before the analysis was added.
	NoAnalyze bool
}

// DefaultConfig is 100 000 orders, a fifth of them refunded, an hour old.
func DefaultConfig(now time.Time) Config {
	return Config{Prefix: "O-seedpaid-", Count: 100000, RefundEvery: 10, CreatedAt: now.Add(-time.Hour)}
}

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,40}$`)

// Validate reports a config the seed cannot write.
func (c Config) Validate() error {
	var errs []error
	if !prefixPattern.MatchString(c.Prefix) {
		errs = append(errs, fmt.Errorf("prefix %q: want 1 to 40 letters, digits or dashes", c.Prefix))
	}
	if c.Count < 1 || c.Count > 10_000_000 {
		errs = append(errs, fmt.Errorf("count %d: want 1 to 10 000 000", c.Count))
	}
	if c.RefundEvery != 0 && c.RefundEvery < 2 {
		errs = append(errs, fmt.Errorf("refund-every %d: want 0 (none) or 2 or more", c.RefundEvery))
	}
	if c.CreatedAt.IsZero() {
		errs = append(errs, errors.New("created-at is required"))
	}
	return errors.Join(errs...)
}

// SKUs are the two SKUs every seeded order holds: its own, so their stock
// rows are the seed's alone.
func (c Config) SKUs() (string, string) {
	base := "SKU-" + strings.TrimPrefix(c.Prefix, "O-")
	return base + "A", base + "B"
}

// Customers start the seeded customer ids; the orders spread over 1 000.
func (c Config) Customers() string { return "C-" + strings.TrimPrefix(c.Prefix, "O-") }

// Services are the five services whose databases hold an order's rows,
// in the order they are seeded; sql/<service>.sql seeds each.
func Services() []string {
	return []string{"order", "payment", "inventory", "points", "notification"}
}

// DSN returns the database URL of a service's database.
type DSN func(service string) (string, error)

// Result is what one service's database got: its rows written or removed.
type Result struct {
	Service string
	Rows    int64
	Took    time.Duration
}

// Seed writes the orders of cfg into every service's database, each in
// one transaction. Seeding a prefix twice fails on the first database (its
// primary keys); Remove it first.
func Seed(ctx context.Context, dsn DSN, cfg Config) ([]Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return each(ctx, dsn, cfg, "")
}

// Remove deletes every row Seed wrote with cfg's prefix (and its SKUs'
// stock) from every service's database; only Prefix of cfg counts.
func Remove(ctx context.Context, dsn DSN, cfg Config) ([]Result, error) {
	if !prefixPattern.MatchString(cfg.Prefix) {
		return nil, fmt.Errorf("prefix %q: want 1 to 40 letters, digits or dashes", cfg.Prefix)
	}
	return each(ctx, dsn, cfg, "_remove")
}

func each(ctx context.Context, dsn DSN, cfg Config, suffix string) ([]Result, error) {
	series, err := files.ReadFile("sql/series.sql")
	if err != nil {
		return nil, err
	}
	skuA, skuB := cfg.SKUs()
	created := cfg.CreatedAt
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	args := []any{cfg.Prefix, cfg.Count, cfg.RefundEvery, skuA, skuB, created.UTC(), cfg.Customers()}
	var out []Result
	for _, service := range Services() {
		body, err := files.ReadFile("sql/" + service + suffix + ".sql")
		if err != nil {
			return out, err
		}
		url, err := dsn(service)
		if err != nil {
			return out, err
		}
		start := time.Now()
		rows, err := run(ctx, url, string(series), statements(string(body)), args, !cfg.NoAnalyze)
		if err != nil {
			return out, fmt.Errorf("%s: %w", service, err)
		}
		out = append(out, Result{Service: service, Rows: rows, Took: time.Since(start)})
	}
	return out, nil
}

// statements splits a file of ours into its statements: each ends with a
// semicolon at the end of a line, and none holds one elsewhere. A general
// SQL splitter is not needed for files this package owns.
func statements(body string) []string {
	var out []string
	for _, s := range strings.Split(body, ";\n") {
		if strings.TrimSpace(stripComments(s)) != "" {
			out = append(out, s)
		}
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
		}
	}
	return b.String()
}

func run(ctx context.Context, dsn, series string, stmts []string, args []any, analyze bool) (int64, error) {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var total int64
	err = postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		for _, s := range stmts {
			res, err := tx.ExecContext(ctx, series+s, args...)
			if err != nil {
				first, _, _ := strings.Cut(strings.TrimSpace(stripComments(s)), "\n")
				return fmt.Errorf("%s: %w", first, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	if err != nil || !analyze {
		return total, err
	}
	// A bulk load leaves the planner without statistics of the rows until
	// autovacuum analyzes them, which it may not have done (or may not do
	// at all, when it is off) by the time a run reads them; without them
	// the services' batch reads were planned as scans of whole tables
	// (docs/runs/2026-12-05-reconcile-100k-paid-after.txt). A history that
	// grew through the services would have been analyzed as it grew.
	if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
		return total, fmt.Errorf("analyze: %w", err)
	}
	return total, nil
}
