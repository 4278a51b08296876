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
	"io"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// usage follows a usage error on stderr.
const usage = "run `go run ./scripts/publish_orders -h` for the flags"

func main() { cli.Main("publish_orders", usage, run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadgen.Parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	_, err = loadgen.Run(ctx, cfg, stdout, stderr)
	return err
}
