// Command shipping is the worked example of docs/adding-a-consumer.md: a
// consumer built on pkg/service's kit that turns a paid order into a
// shipment and takes the goods its refunds return off it, each exactly once
// in effect.
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
