// Command reconciliation is the reconciliation service: it compares what
// every service knows about each order with what the order's state requires
// of it, records each disagreement as a finding, compensates through the
// owning service's API, and measures how long orders take to converge.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
