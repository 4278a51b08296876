package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/ports"
)

// run wires the service and serves until ctx ends: the consumer that moves
// stock with its HTTP API, plus the relay of its callbacks. It returns nil
// on a clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.NewConsumer(ctx, cfg.ConsumerConfig, stdout, service.Options{
		Migrations: []postgres.MigrationSet{outbox.Schema(), postgres.EmbeddedSet("inventory", migrations)},
		MapError:   ports.MapError,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	orders := adapters.NewOrderService(cfg.CallbackSenderConfig)
	relay, err := svc.AddRelay(cfg.Relay, orders.Callbacks)
	if err != nil {
		return err
	}
	repo := adapters.NewRepository(svc.DB, relay)
	ports.Register(svc.HTTP.Echo, repo)
	ports.RegisterReconciliation(svc.Admin, repo, svc.Facts())
	svc.Describe(ports.Operations()...)
	stock := app.NewConsumer(repo, svc.FailPoints, svc.Logger)
	return svc.Run(ctx, service.Events{Transitions: stock.Transitions(), ApplyBatch: stock.Apply})
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires them, and its relay's. The
// consumer kit adds its own.
func failPoints() []string {
	return append([]string{app.FailPoint}, outbox.FailPoints()...)
}
