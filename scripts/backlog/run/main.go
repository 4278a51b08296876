// Command run is `make drill-backlog` (docs/backlog.md): the tutorial's
// backlog drill against a suite started by `make run`, or by `docker
// compose up` with `make compose-control` serving the same control API
// (CONTROL_ADDR). It scales
// inventory, points and notification to one instance, publishes N
// OrderPaid events with a run id, scales them out after a delay, samples
// lag, oldest age, throughput, retries, dead letters, memory, database
// connections and partition assignment every second, and once drained
// verifies that every event was applied exactly once. It prints a table,
// and writes report.json (every sample) and report.html (charts) under
// --out.
//
//	go run ./scripts/backlog/run --count 20000 --run-id b1
//
// It exits with status 1 when a check fails or the drill could not finish,
// and 2 on a usage error (bad flags, a run id used before).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// usage follows a usage error on stderr.
const usage = "run `go run ./scripts/backlog/run -h` for the flags"

func main() { cli.Main("drill-backlog", usage, run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, target, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	control := backlog.NewControlClient(controlURL(getenv))
	target.Scaler, target.Lister = control, control
	out := backlog.Output{Table: stdout, Progress: stderr, Live: cli.IsTerminal(stderr)}
	rep, err := backlog.Run(ctx, cfg, target, out)
	if err != nil {
		return err
	}
	if cfg.Out != "" {
		fmt.Fprintf(stdout, "\nfiles: %s, %s\n", filepath.Join(cfg.Out, backlog.JSONFile), filepath.Join(cfg.Out, backlog.HTMLFile))
	}
	if !rep.Pass {
		return cli.ErrFailed
	}
	return nil
}

// parse reads the flags, with defaults from the environment as the suite
// reads it (README.md (Configuration)).
func parse(args []string, getenv func(string) string, stderr io.Writer) (backlog.Config, backlog.Target, error) {
	env := envconfig.New(getenv)
	fs := flag.NewFlagSet("drill-backlog", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./scripts/backlog/run [flags]   (make drill-backlog BACKLOG_FLAGS=\"...\")")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "The backlog drill against make run (or compose with make compose-control): one instance per consumer, N OrderPaid events,")
		fmt.Fprintln(stderr, "scale-out after a delay, sampling until drained, then exactly-once checks (docs/backlog.md).")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	var cfg backlog.Config
	fs.IntVar(&cfg.Count, "count", backlog.DefaultCount, "how many orders to publish (one OrderPaid each)")
	fs.BoolVar(&cfg.Mix, "mix", false, "mixed load: refunds and rejected refunds too, ~10% of events twice, some refunds before their payment")
	fs.StringVar(&cfg.RunID, "run-id", "", "names the run; ids and SKUs derive from it; must be new (default backlog-<date>-<time>)")
	fs.IntVar(&cfg.SKUs, "skus", backlog.DefaultSKUs, "spread the orders over this many SKUs of the run (small = hot rows)")
	fs.IntVar(&cfg.Instances, "instances", backlog.DefaultInstances, "processes of each scaled service after the scale-out")
	fs.DurationVar(&cfg.ScaleAfter, "scale-after", backlog.DefaultScaleAfter, "delay from the start of the publish to the scale-out")
	fs.DurationVar(&cfg.Interval, "interval", backlog.DefaultInterval, "sampling period")
	services := fs.String("services", strings.Join(backlog.DefaultServices(), ","), "the services scaled and verified, comma-separated")
	fs.DurationVar(&cfg.Timeout, "timeout", backlog.DefaultTimeout, "give up when the backlog has not drained this long after the publish started")
	out := fs.String("out", "", "directory for report.json and report.html (default .data/backlog/<run-id>; \"none\": no files)")
	fs.BoolVar(&cfg.KeepInstances, "keep-instances", false, "leave the services scaled out at the end")
	fs.Float64Var(&cfg.Rate, "rate", 0, "publish at most this many events per second; 0 = unlimited")
	fs.IntVar(&cfg.Concurrency, "concurrency", backlog.DefaultConcurrency, "produce calls in flight")
	fs.IntVar(&cfg.Batch, "batch", backlog.DefaultBatch, "records per produce call")
	brokers := fs.String("brokers", env.String("KAFKA_BROKERS", suite.DefaultKafkaBrokers), "Kafka bootstrap brokers, comma-separated (KAFKA_BROKERS)")
	topic := fs.String("topic", env.String("ORDER_EVENTS_TOPIC", suite.OrderEventsTopic), "the order events topic (ORDER_EVENTS_TOPIC)")
	dbURL := fs.String("database-url", env.String("DATABASE_URL", suite.DefaultDatabaseURL), "the services' Postgres server, read only (DATABASE_URL)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return cfg, backlog.Target{}, err
	}
	// The library reads a zero as "the default"; on the command line it is
	// a mistake.
	for _, f := range []struct {
		name string
		v    int
	}{{"--count", cfg.Count}, {"--skus", cfg.SKUs}, {"--instances", cfg.Instances}, {"--concurrency", cfg.Concurrency}, {"--batch", cfg.Batch}} {
		if f.v < 1 {
			return cfg, backlog.Target{}, fmt.Errorf("%w: %s %d: want at least 1", cli.ErrUsage, f.name, f.v)
		}
	}
	cfg.Services = envconfig.Split(*services)
	cfg.RunID = cmp.Or(cfg.RunID, backlog.NewRunID())
	switch *out {
	case "":
		cfg.Out = backlog.DefaultOut(cfg.RunID)
	case "none":
	default:
		cfg.Out = *out
	}
	target := backlog.Target{
		Brokers:     envconfig.Split(*brokers),
		Topic:       *topic,
		AdminToken:  getenv("ADMIN_TOKEN"),
		DatabaseURL: *dbURL,
	}
	if err := cfg.Validate(); err != nil {
		return cfg, target, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	return cfg, target, nil
}

func controlURL(getenv func(string) string) string {
	return "http://" + envconfig.New(getenv).String("CONTROL_ADDR", "127.0.0.1:8090")
}
