// Command run is `make run`: it starts the whole suite on this machine
// without Docker. Run it from the repository root:
//
//	go run ./scripts/run
//
// It starts the embedded broker unless KAFKA_BROKERS is set, creates the
// six databases on DATABASE_URL, builds and starts the six services, waits
// until they are ready and prints how to try them. Ctrl-C stops everything;
// a second Ctrl-C kills the runner at once.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// After the first signal, the next one gets its default effect.
	context.AfterFunc(ctx, stop)
	err := run(ctx, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg := devrun.LoadConfig(getenv)
	cfg.Colour = cli.IsTerminal(stdout) && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	return devrun.Run(ctx, cfg, stdout)
}
