package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/adapters"
	"github.com/reliable-orders/fulfillment/examples/shipping/internal/app"
	"github.com/reliable-orders/fulfillment/examples/shipping/internal/ports"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// run wires the service and serves until ctx ends. It returns nil on a
// clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.NewConsumer(ctx, cfg, stdout, service.Options{
		Migrations: []postgres.MigrationSet{postgres.EmbeddedSet("shipping", migrations)},
		MapError:   ports.MapError,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	repo := adapters.NewRepository(svc.DB)
	ports.Register(svc.HTTP.Echo, repo)
	svc.Describe(ports.Operations()...)
	shipments := app.NewConsumer(repo, svc.FailPoints)
	return svc.Run(ctx, service.Events{Transitions: shipments.Transitions(), ApplyBatch: shipments.Apply})
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires it; the consumer kit adds
// its own.
func failPoints() []string {
	return []string{app.FailPoint}
}
