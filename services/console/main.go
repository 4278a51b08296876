// Command console is the learner's console: an order's journey across
// every service on one time axis with its traces, the consumers' lag, the
// dead letters with a replay button, the drills, the fail points and the
// runner's switches, read from the services' own APIs. It keeps no state
// of its own but the last minutes of lag samples.
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
