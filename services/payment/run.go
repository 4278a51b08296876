package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/callback"
	"github.com/reliable-orders/fulfillment/services/payment/internal/consumer"
	"github.com/reliable-orders/fulfillment/services/payment/internal/metrics"
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
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{},
		outbox.Schema(), inbox.Schema(), versionguard.Schema(), dlq.Schema(), postgres.EmbeddedSet("payment", migrations))
	if err != nil {
		return err
	}
	defer db.Close()

	repo := storage.New(db)
	dlqStore := dlq.NewStore(db)
	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
		MapError:   ports.MapError,
	}, logger)
	orders := orderclient.New(&http.Client{Timeout: httpTimeout}, cfg.OrderURL)
	ports.NewHandler(orders, repo).Register(srv.Echo)
	adminGroup := srv.Admin()
	ports.RegisterAdmin(adminGroup, db)
	admin.RegisterConsumer(adminGroup, db, cfg.ConsumerGroup, dlqStore)
	admin.RegisterFailPoints(adminGroup, fp)
	reg.MustRegister(metrics.NewBacklog(db))

	sink := outbox.NewHTTPSink(&http.Client{Timeout: httpTimeout}, cfg.OrderURL+callback.Path, []byte(cfg.CallbackSecret))
	relay, err := outbox.NewRelay(db, sink, cfg.Relay, logger, outbox.NewRelayMetrics(reg), fp)
	if err != nil {
		return fmt.Errorf("callback relay: %w", err)
	}
	refunds := refundConsumer{
		cfg:       cfg,
		processor: consumer.NewProcessor(db, cfg.ConsumerGroup, consumer.NewApplier(repo, fp, logger)),
		dlq:       dlqStore,
		metrics:   messaging.NewMetrics(reg),
		logger:    logger,
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return relay.Run(ctx) })
	g.Go(func() error { return consumer.Supervise(ctx, logger, consumer.DefaultRestart(), refunds.run) })
	logger.InfoContext(ctx, "payment service started", "addr", cfg.HTTPAddr, "orderUrl", cfg.OrderURL)
	return g.Wait()
}

// refundConsumer connects the refund consumer to the broker; Supervise
// starts it again whenever the broker is unreachable or the subscription
// breaks.
type refundConsumer struct {
	cfg       config
	processor *inbox.Processor
	dlq       *dlq.Store
	metrics   *messaging.Metrics
	logger    *slog.Logger
}

// errRouterStopped is returned when the router stops while the service is
// still running, so the supervisor reconnects.
var errRouterStopped = errors.New("consumer router stopped")

// run consumes order-events until ctx ends or the consumer fails.
func (c refundConsumer) run(ctx context.Context) error {
	wlogger := watermill.NewSlogLoggerWithLevelMapping(c.logger, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
	pub, err := messaging.NewPublisher(c.cfg.Brokers, wlogger)
	if err != nil {
		return fmt.Errorf("DLQ publisher: %w", err)
	}
	defer pub.Close()
	sub, err := messaging.NewSubscriber(c.cfg.Brokers, c.cfg.ConsumerGroup, wlogger)
	if err != nil {
		return fmt.Errorf("subscriber: %w", err)
	}
	defer sub.Close()
	router, err := messaging.NewRouter(messaging.ConsumerConfig{
		Consumer: c.cfg.ConsumerGroup,
		Topic:    c.cfg.OrderEventsTopic,
		DLQTopic: c.cfg.DLQTopic,
		Retry:    c.cfg.Retry,
	}, sub, pub, c.dlq, c.metrics, c.logger, consumer.Handler(c.processor))
	if err != nil {
		return fmt.Errorf("router: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := router.Run(gctx); err != nil {
			return fmt.Errorf("run router: %w", err)
		}
		if ctx.Err() == nil {
			return errRouterStopped
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		return router.Close()
	})
	return g.Wait()
}
