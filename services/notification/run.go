package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/notification/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/notification/internal/app"
	"github.com/reliable-orders/fulfillment/services/notification/internal/ports"
)

// run wires the service and serves until ctx ends. It returns nil on a
// clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.NewConsumer(ctx, cfg, stdout, service.Options{
		Migrations: []postgres.MigrationSet{postgres.EmbeddedSet("notification", migrations)},
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	repo := adapters.NewRepository(svc.DB)
	ports.Register(svc.HTTP.Echo, repo)
	ports.RegisterReconciliation(svc.Admin, repo, svc.Facts())
	svc.Describe(ports.Operations()...)
	// Notifications are recorded in the consumer's transaction: the
	// suite simulates the provider (app.DBSink).
	notices := app.NewConsumer(app.DBSink(repo, svc.Logger), svc.FailPoints, svc.Logger)
	return svc.Run(ctx, service.Events{Transitions: notices.Transitions(), ApplyBatch: notices.Apply, LateFacts: notices.LateFacts()})
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires it; the consumer kit adds
// its own.
func failPoints() []string {
	return []string{app.FailPoint}
}
