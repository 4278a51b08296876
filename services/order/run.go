package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
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
	logger := observability.NewLogger(stdout, adapters.Producer, cfg.LogLevel)
	reg := observability.NewRegistry()
	fp, err := failpoint.Parse(cfg.FailPoints)
	if err != nil {
		return fmt.Errorf("fail points: %w", err)
	}
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{},
		outbox.Schema(), postgres.EmbeddedSet("order", migrations))
	if err != nil {
		return err
	}
	defer db.Close()
	reg.MustRegister(outbox.NewBacklogCollector(db, logger))

	repo := adapters.NewRepository(db, cfg.OrderEventsTopic, fp)
	// A snapshot asks four services at once, many snapshots at a time under
	// load: keep the connections.
	peerClient := &http.Client{Timeout: snapshotTimeout, Transport: httpapi.ClientTransport(32)}
	peers := adapters.NewPeers(peerClient, cfg.Peers, cfg.AdminToken, snapshotTimeout)
	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
		MapError:   ports.MapError,
	}, logger)
	adminGroup := srv.Admin()
	ports.NewHandler(repo, peers, []byte(cfg.CallbackSecret), fp).Register(srv.Echo, adminGroup)
	admin.RegisterFailPoints(adminGroup, fp)
	admin.RegisterOutbox(adminGroup, db)

	// The publisher connects lazily: a broker outage leaves rows PENDING and
	// never stops the service.
	pub := messaging.NewLazyPublisher(cfg.Brokers, watermill.NewSlogLogger(logger))
	relay, err := outbox.NewRelay(db, outbox.NewPublisherSink(pub), cfg.Relay, logger, outbox.NewRelayMetrics(reg), fp)
	if err != nil {
		return fmt.Errorf("outbox relay: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error {
		err := relay.Run(ctx)
		return errors.Join(err, pub.Close())
	})
	logger.InfoContext(ctx, "order service started", "addr", cfg.HTTPAddr, "database", cfg.DBName,
		"brokers", cfg.Brokers, "topic", cfg.OrderEventsTopic)
	return g.Wait()
}
