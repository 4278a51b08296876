package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/points/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/points/internal/app"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
)

// run wires the service and serves until ctx ends. It returns nil on a
// clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.NewConsumer(ctx, cfg, stdout, service.Options{
		Migrations: []postgres.MigrationSet{postgres.EmbeddedSet("points", migrations)},
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	repo := adapters.NewRepository(svc.DB, svc.Group)
	ports.Register(svc.HTTP.Echo, repo)
	ports.RegisterReconciliation(svc.Admin, repo, svc.Facts())
	svc.Describe(ports.Operations()...)
	ledger := app.NewConsumer(repo, svc.FailPoints, svc.Logger)
	return svc.Run(ctx, service.Events{Transitions: ledger.Transitions(), ApplyBatch: ledger.Apply})
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires it; the consumer kit adds
// its own.
func failPoints() []string {
	return []string{app.FailPoint}
}
