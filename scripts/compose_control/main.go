// Command compose_control is `make compose-control`: the control API of
// `make run` (README.md (Drills)) for a suite started by `docker compose
// up`, so every drill runs against compose too. It serves on CONTROL_ADDR
// (default 127.0.0.1:8090) and carries each request out with the Docker
// CLI on the project's compose file. Run it from the repository root:
//
//	go run ./scripts/compose_control
//
// Ctrl-C stops it, after it has removed the extra consumer instances a
// scale request started.
package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func main() {
	cli.Main("compose-control", "", func(ctx context.Context, _ []string, getenv func(string) string, stdout, _ io.Writer) error {
		return devrun.ServeCompose(ctx, devrun.LoadComposeConfig(getenv), stdout)
	})
}
