package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/ports"
)

// snapshotTimeout bounds the snapshot's reads of the other services: a
// service that does not answer in time shows as UNKNOWN.
const snapshotTimeout = 2 * time.Second

// run wires the service and serves until ctx ends. The HTTP API and the
// outbox relay run side by side; a broker outage only delays the relay.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.New(ctx, cfg.Config, stdout, service.Options{
		Migrations: []postgres.MigrationSet{outbox.Schema(), postgres.EmbeddedSet("order", migrations)},
		MapError:   ports.MapError,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	// The publisher connects lazily: a broker outage leaves rows PENDING and
	// never stops the service.
	pub := messaging.NewLazyPublisher(cfg.Events.Brokers, messaging.WatermillLogger(svc.Logger))
	relay, err := svc.AddRelay(cfg.Relay, outbox.NewPublisherSink(pub))
	if err != nil {
		return errors.Join(err, pub.Close())
	}
	repo := adapters.NewRepository(svc.DB, cfg.Events.OrderEventsTopic, svc.FailPoints, relay)
	// A snapshot asks five services at once, many snapshots at a time under
	// load: keep the connections.
	peerClient := &http.Client{Timeout: snapshotTimeout, Transport: httpapi.ClientTransport(32)}
	peers := adapters.NewPeers(peerClient, cfg.Peers, cfg.AdminToken, snapshotTimeout)
	keys := ports.CallbackKeys{Secrets: cfg.Callbacks.Secrets(), Window: cfg.Callbacks.ReplayWindow}
	ports.NewHandler(app.NewOrders(repo, peers), keys, svc.FailPoints).Register(svc.HTTP, svc.Admin)
	svc.Describe(ports.Operations()...)

	err = svc.Run(ctx, "brokers", cfg.Events.Brokers, "topic", cfg.Events.OrderEventsTopic)
	return errors.Join(err, pub.Close())
}

// failPoints are the fail points the service declares (README.md, Fail
// points): its own, next to the code that fires them, and its relay's.
func failPoints() []string {
	return append([]string{adapters.FailPointBeforeCommit, ports.FailPointAfterCommit}, outbox.FailPoints()...)
}
