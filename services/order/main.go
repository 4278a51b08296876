// Command order is the order service: it owns the order lifecycle, applies
// the payment service's signed callbacks, and emits every state change to
// order-events through a transactional outbox (docs/design.md, Order
// lifecycle and Outbox).
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
