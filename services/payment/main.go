// Command payment-service accepts payments for orders (with a simulated
// provider that always succeeds), executes the refunds the order service
// requests on order-events, and reports both back to the order service with
// signed callbacks delivered through its outbox.
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
