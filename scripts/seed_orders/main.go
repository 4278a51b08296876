// Command seed_orders writes many converged paid orders, a fifth of them
// refunded, straight into the five services' databases on DATABASE_URL
// (package seedorders) and analyzes each database, or removes them again:
// the orders a reconciliation run over 100 000 paid orders compares
// (docs/runs/2026-12-05-reconcile-100k-paid.txt, and -after.txt).
//
//	go run ./scripts/seed_orders [--count 100000] [--prefix O-seedpaid-] [--refund-every 10] [--analyze=false]
//	go run ./scripts/seed_orders --remove [--prefix O-seedpaid-]
//
// The databases must exist and be migrated: start `make run` once. It
// exits 1 when a database refused the rows, 2 on a usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/seedorders"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func main() { cli.Main("seed_orders", "", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg := seedorders.DefaultConfig(time.Now())
	fs := flag.NewFlagSet("seed_orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Count, "count", cfg.Count, "how many orders")
	fs.StringVar(&cfg.Prefix, "prefix", cfg.Prefix, "start of every seeded order id (--remove deletes by it)")
	fs.IntVar(&cfg.RefundEvery, "refund-every", cfg.RefundEvery, "every Nth order refunded in full and the next in part; 0: none")
	age := fs.Duration("age", time.Hour, "how long ago the first order was created")
	remove := fs.Bool("remove", false, "delete the rows seeded with --prefix instead of seeding")
	analyze := fs.Bool("analyze", true, "analyze each database once written (false: leave the planner's statistics to autovacuum)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	cfg.CreatedAt = time.Now().Add(-*age)
	cfg.NoAnalyze = !*analyze
	serverURL := envconfig.New(getenv).String("DATABASE_URL", postgres.DefaultServerURL)
	dsn := func(service string) (string, error) {
		s, ok := suite.Lookup(suite.Services(), service)
		if !ok {
			return "", fmt.Errorf("no service %q", service)
		}
		return postgres.WithDatabase(serverURL, s.DBName)
	}
	verb, do := "seeded", seedorders.Seed
	if *remove {
		verb, do = "removed", seedorders.Remove
	} else if err := cfg.Validate(); err != nil {
		return cli.Usagef("%w", err)
	}
	start := time.Now()
	results, err := do(ctx, dsn, cfg)
	for _, r := range results {
		fmt.Fprintf(stdout, "%-14s %s %d rows in %s\n", r.Service, verb, r.Rows, r.Took.Round(time.Millisecond))
	}
	if err != nil {
		return err
	}
	if *remove {
		fmt.Fprintf(stdout, "removed the orders %s* in %s\n", cfg.Prefix, time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprintf(stdout, "seeded %d orders %s1..%d (refund every %d) in %s\n", cfg.Count, cfg.Prefix, cfg.Count, cfg.RefundEvery, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
