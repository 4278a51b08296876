// Command publish_orders is the load generator of the backlog drill
// (docs/backlog.md): it publishes N OrderPaid events straight to the
// order-events topic, or drives N orders through the HTTP API, and prints
// a progress bar on stderr and a summary table on stdout.
//
//	go run ./scripts/publish_orders --count 100000 --run-id backlog-01
//	go run ./scripts/publish_orders --count 500 --run-id api-01 --via api --seed-stock 1000
//
// It exits with status 1 when an event failed or it was interrupted, and 2
// on a usage error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// Exit statuses.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadgen.Parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	_, err = loadgen.Run(ctx, cfg, stdout, stderr)
	return err
}

// exitCode reports err on stderr and maps it to the exit status.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, loadgen.ErrUsage):
		fmt.Fprintln(stderr, "publish_orders:", err)
		fmt.Fprintln(stderr, "run `go run ./scripts/publish_orders -h` for the flags")
		return exitUsage
	default:
		fmt.Fprintln(stderr, "publish_orders:", err)
		return exitFailed
	}
}
