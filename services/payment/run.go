package main

import (
	"context"
	"io"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/ports"
)

// run wires the service and serves until ctx ends: the consumer of refund
// requests with its HTTP API, plus the payment API and the callback relay.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.NewConsumer(ctx, cfg.ConsumerConfig, stdout, service.Options{
		Migrations: []postgres.MigrationSet{outbox.Schema(), postgres.EmbeddedSet("payment", migrations)},
		MapError:   ports.MapError,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	orders := adapters.NewOrderService(cfg.CallbackSenderConfig, cfg.AdminToken)
	relay, err := svc.AddRelay(cfg.Relay, orders.Callbacks)
	if err != nil {
		return err
	}
	repo := adapters.NewRepository(svc.DB, relay)
	ports.NewHandler(orders.Orders, repo).Register(svc.HTTP.Echo)
	ports.RegisterReconciliation(svc.Admin, repo, svc.Facts())
	refunds := app.NewRefunds(repo)
	ports.RegisterRefunds(svc.Admin, refunds, orders.Orders)
	svc.Describe(ports.Operations()...)
	consumer := app.NewConsumer(refunds, svc.FailPoints, svc.Logger)
	return svc.Run(ctx, service.Events{Transitions: consumer.Transitions(), Apply: consumer.Apply})
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires them, and its relay's. The
// consumer kit adds its own.
func failPoints() []string {
	return append([]string{app.FailPoint}, outbox.FailPoints()...)
}
