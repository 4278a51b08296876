// Command run runs the tutorial's drills against a running suite and prints
// one line per case — PASS, FAIL or SKIP, the convergence time, what was
// expected and what was seen — as an aligned table. It exits with status 1
// when a case fails and 2 on a usage error.
//
//	go run ./scripts/drill/run [flags] duplicate|loss|reorder|poison|replay|all ...
//
// Against `make run`, or `docker compose up` with `make compose-control`
// (README.md (Ports)), it needs no flags: the services are on 8081-8085, the
// broker on 127.0.0.1:9092 and the runner's control API, which the crash
// drills use to restart a service with a fail point armed, and the broker
// and outage drills to stop and fault the broker or stop the order service,
// on 127.0.0.1:8090. --outage sets how long an outage lasts (30 s). Each
// case removes the synthetic orders it planted from the suite's databases
// on DATABASE_URL's server (--database-url; none with --target unless
// given), unless --keep-planted. ADMIN_TOKEN, CALLBACK_SECRET, RETRY_MAX_ATTEMPTS,
// RETRY_INITIAL_INTERVAL, RETRY_MAX_INTERVAL, PARK_DEADLINE, KAFKA_BROKERS,
// ORDER_EVENTS_TOPIC, DLQ_TOPIC and CONTROL_ADDR are read as the suite
// reads them (README.md (Configuration)).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// usage follows a usage error on stderr.
const usage = "run `go run ./scripts/drill/run -h` for the flags"

func main() { cli.Main("drill", usage, run) }

// options is the parsed command line.
type options struct {
	target  drill.Target
	control string
	names   []string
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	cases, err := drill.Select(opts.names...)
	if err != nil {
		return cli.Usagef("%w", err)
	}
	t := opts.target
	if opts.control != "" {
		cc := drill.NewControlClient(opts.control, t.Timeout)
		if _, err := cc.Services(ctx); err != nil {
			fmt.Fprintf(stderr, "drill: no control API at %s (%v): the crash drills will be skipped (make run serves one; for compose, make compose-control)\n", opts.control, err)
		} else {
			t.Controller = cc
		}
	}

	fmt.Fprintf(stdout, "drill run %s: %s against order %s, brokers %s, topic %s\n",
		t.RunID, strings.Join(opts.names, " "), t.URLs[drill.Order], strings.Join(t.Brokers, ","), t.Topic)
	results := drill.Run(ctx, t, cases, func(c drill.Case) {
		fmt.Fprintf(stderr, "  running %s ...\n", c.Name)
	})
	fmt.Fprintln(stdout)
	if err := drill.WriteTable(stdout, results); err != nil {
		return err
	}
	if drill.Failed(results) > 0 || ctx.Err() != nil {
		return cli.ErrFailed
	}
	return nil
}

// parse reads the command line and the environment.
func parse(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	env := envconfig.New(getenv)
	fs := flag.NewFlagSet("drill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./scripts/drill/run [flags] %s|all ...\n\n", strings.Join(drill.Drills(), "|"))
		fmt.Fprintln(stderr, "Runs the tutorial's drills against a running suite (make run by default).")
		fmt.Fprintln(stderr, "A case name such as loss/after-publish runs that case alone.\n\nflags:")
		fs.PrintDefaults()
	}
	targets := fs.String("target", "", "service base URLs that differ from make run's, as name=url pairs separated by commas\n(e.g. order=http://10.0.0.5:8081,inventory=http://10.0.0.5:8083)")
	brokers := fs.String("brokers", env.String("KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka bootstrap brokers, comma-separated (KAFKA_BROKERS)")
	topic := fs.String("topic", env.String("ORDER_EVENTS_TOPIC", drill.DefaultTopic), "the order events topic (ORDER_EVENTS_TOPIC)")
	dlqTopic := fs.String("dlq-topic", env.String("DLQ_TOPIC", drill.DefaultDLQTopic), "the dead-letter topic (DLQ_TOPIC)")
	defaultControl := "http://" + env.String("CONTROL_ADDR", "127.0.0.1:8090")
	if getenv("CONTROL_ADDR") == "off" {
		defaultControl = "none"
	}
	control := fs.String("control", defaultControl, "the control API of make run or make compose-control; \"none\" skips the crash drills (CONTROL_ADDR)")
	runID := fs.String("run-id", "", "prefix of every order id and SKU the drills create (default: a new one)")
	timeout := fs.Duration("timeout", drill.DefaultTimeout, "bound of each wait for convergence")
	outage := fs.Duration("outage", drill.DefaultOutage, "how long loss/broker-outage and loss/callback-outage keep the broker or the order service away")
	databaseURL := fs.String("database-url", "", "the Postgres server of the suite's databases, for the cleanup of planted orders and the restore cases\n(default: DATABASE_URL, make run's, unless --target names another suite: then none, and those are skipped)")
	keepPlanted := fs.Bool("keep-planted", false, "keep the rows of the synthetic orders the cases plant, for inspection\n(by default each case removes them once its verdict is taken)")
	if err := cli.Parse(fs, args); err != nil {
		return options{}, err
	}
	if fs.NArg() == 0 {
		return options{}, fmt.Errorf("%w: name a drill: %s or all", cli.ErrUsage, strings.Join(drill.Drills(), ", "))
	}
	// The suite's own settings the cases must know, read as it reads them.
	retry := env.Int("RETRY_MAX_ATTEMPTS", drill.DefaultRetryMaxAttempts)
	initial := env.Duration("RETRY_INITIAL_INTERVAL", drill.DefaultRetryInitial)
	maxInterval := env.Duration("RETRY_MAX_INTERVAL", drill.DefaultRetryMax)
	parkDeadline := env.Duration("PARK_DEADLINE", drill.DefaultParkDeadline)
	if err := env.Err(); err != nil {
		return options{}, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	urls := drill.LocalURLs()
	if *targets != "" {
		for _, pair := range strings.Split(*targets, ",") {
			name, u, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || !slices.Contains(drill.Services(), name) || !strings.HasPrefix(u, "http") {
				return options{}, fmt.Errorf("%w: --target %q: want name=http://host:port with name one of %s",
					cli.ErrUsage, pair, strings.Join(drill.Services(), ", "))
			}
			urls[name] = u
		}
	}
	// reconcile/lost-effect and reconcile/restore-from-backup play a
	// restored backup of inventory's and the order service's databases, and every
	// case removes the synthetic orders it planted from all of them: the
	// suite's databases on make run's Postgres, or on --database-url's.
	// Another suite's (--target) are not make run's: without
	// --database-url the drills leave its databases alone.
	server := *databaseURL
	if server == "" && *targets == "" {
		server = env.String("DATABASE_URL", suite.DefaultDatabaseURL)
	}
	databases := map[string]string{}
	if server != "" {
		var err error
		if databases, err = drill.LocalDatabases(server); err != nil {
			return options{}, fmt.Errorf("%w: %w", cli.ErrUsage, err)
		}
	}
	if *timeout <= 0 {
		return options{}, fmt.Errorf("%w: --timeout must be positive", cli.ErrUsage)
	}
	if *outage <= 0 {
		return options{}, fmt.Errorf("%w: --outage must be positive", cli.ErrUsage)
	}
	opts := options{
		target: drill.Target{
			URLs:                 urls,
			Brokers:              envconfig.Split(*brokers),
			Topic:                *topic,
			DLQTopic:             *dlqTopic,
			AdminToken:           getenv("ADMIN_TOKEN"),
			CallbackSecret:       env.String("CALLBACK_SECRET", drill.DefaultCallbackSecret),
			RetryMaxAttempts:     retry,
			RetryInitialInterval: initial,
			RetryMaxInterval:     maxInterval,
			ParkDeadline:         parkDeadline,
			RunID:                cmp.Or(*runID, drill.NewRunID()),
			Timeout:              *timeout,
			Outage:               *outage,
			Databases:            databases,
			KeepPlanted:          *keepPlanted,
		},
		names: fs.Args(),
	}
	if *control != "none" {
		opts.control = *control
	}
	if err := opts.target.Validate(); err != nil {
		return options{}, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	return opts, nil
}
