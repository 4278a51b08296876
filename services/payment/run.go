package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	eventconsumer "github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/callback"
	"github.com/reliable-orders/fulfillment/services/payment/internal/consumer"
	"github.com/reliable-orders/fulfillment/services/payment/internal/orderclient"
	"github.com/reliable-orders/fulfillment/services/payment/internal/ports"
	"github.com/reliable-orders/fulfillment/services/payment/internal/storage"
)

// serviceName is the name in logs and the producer of what it emits.
const serviceName = "payment-service"

// httpTimeout bounds one call to the order service (look-up or callback).
const httpTimeout = 5 * time.Second

// run wires the service and serves until ctx ends: the HTTP API, the
// callback relay and the refund consumer, each owned by one errgroup.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	logger := observability.NewLogger(stdout, serviceName, cfg.LogLevel)
	reg := observability.NewRegistry()
	fp, err := failpoint.Parse(cfg.FailPoints)
	if err != nil {
		return fmt.Errorf("FAILPOINTS: %w", err)
	}
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{MaxOpen: cfg.Consumer.DBMaxConns},
		outbox.Schema(), inbox.Schema(), versionguard.Schema(), dlq.Schema(), postgres.EmbeddedSet("payment", migrations))
	if err != nil {
		return err
	}
	defer db.Close()

	repo := storage.New(db)
	dlqStore := dlq.NewStore(db)
	dlqPub := messaging.NewLazyPublisher(cfg.Consumer.Brokers, messaging.WatermillLogger(logger))
	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
		MapError:   ports.MapError,
	}, logger)
	// One transport for every call to the order service, keeping enough idle
	// connections for the callbacks in flight (Go's default keeps two).
	toOrders := &http.Client{Timeout: httpTimeout, Transport: httpapi.ClientTransport(2 * outbox.DefaultHTTPSinkParallel)}
	orders := orderclient.New(toOrders, cfg.OrderURL)
	ports.NewHandler(orders, repo).Register(srv.Echo)
	adminGroup := srv.Admin()
	admin.RegisterConsumer(adminGroup, db, cfg.Consumer.ConsumerGroup, dlqStore)
	admin.RegisterReplay(adminGroup, dlqStore, dlqPub)
	admin.RegisterFailPoints(adminGroup, fp)
	admin.RegisterOutbox(adminGroup, db)
	ports.RegisterReconciliation(adminGroup, repo, admin.NewFactsReader(db, cfg.Consumer.ConsumerGroup))
	ports.RegisterRefunds(adminGroup, repo)
	lagMonitor := lag.Register(adminGroup, reg, lag.Config{Brokers: cfg.Consumer.Brokers,
		Group: cfg.Consumer.ConsumerGroup, Topic: cfg.Consumer.OrderEventsTopic})
	reg.MustRegister(outbox.NewBacklogCollector(db, logger))

	sink := outbox.NewHTTPSink(toOrders, cfg.OrderURL+callback.Path, []byte(cfg.CallbackSecret))
	relay, err := outbox.NewRelay(db, sink, cfg.Relay, logger, outbox.NewRelayMetrics(reg), fp)
	if err != nil {
		return fmt.Errorf("callback relay: %w", err)
	}
	guard := consumer.NewGuard(cfg.Consumer.ConsumerGroup, consumer.NewApplier(repo, fp, logger))
	proc := inbox.NewProcessor(db, cfg.Consumer.ConsumerGroup, guard)
	batcher := inbox.NewBatchProcessor(proc, inbox.BatchConfig{
		MaxBatch: cfg.Consumer.BatchSize, Linger: cfg.Consumer.BatchLinger,
	}, reg)
	// Process returns only after the transaction committed, so the router
	// acknowledges after the commit.
	refunds := cfg.Consumer.Runtime(dlqPub, dlqStore, eventconsumer.NewMetrics(lagMonitor.Registerer()), logger, batcher.Process)
	refunds.Config.FailPoints = fp
	refunds.Parked, refunds.DB = proc, db

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return relay.Run(ctx) })
	g.Go(func() error { return batcher.Run(ctx) })
	g.Go(func() error { return eventconsumer.Run(ctx, refunds) })
	g.Go(func() error { return lagMonitor.Run(ctx) })
	logger.InfoContext(ctx, "payment service started", "addr", cfg.HTTPAddr, "orderUrl", cfg.OrderURL)
	err = g.Wait()
	return errors.Join(err, dlqPub.Close())
}
