package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/consumer"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
	"github.com/reliable-orders/fulfillment/services/points/internal/storage"
)

// While the broker is unreachable the consumer retries with this backoff,
// logging reconnectWarning each time.
const (
	reconnectInitial = 500 * time.Millisecond
	reconnectMax     = 30 * time.Second
	reconnectWarning = "consumer not connected to the broker; retrying"
)

// run wires the service and serves until ctx ends. It returns nil on a
// clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := observability.NewLogger(stdout, "points-service", cfg.LogLevel)
	reg := observability.NewRegistry()
	fp, err := failpoint.Parse(cfg.FailPoints)
	if err != nil {
		return err
	}
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{},
		inbox.Schema(), versionguard.Schema(), dlq.Schema(), postgres.EmbeddedSet("points", migrations))
	if err != nil {
		return err
	}
	defer db.Close()

	repo := storage.New(db, cfg.ConsumerGroup)
	dead := dlq.NewStore(db)
	cons := consumer.New(repo, fp, logger)
	proc := inbox.NewProcessor(db, cfg.ConsumerGroup, versionguard.New(cfg.ConsumerGroup, cons.Transitions(), cons.Apply))
	handle := func(ctx context.Context, env event.Envelope) error {
		outcome, err := proc.Process(ctx, env)
		if err != nil {
			return err
		}
		logger.DebugContext(ctx, "event processed",
			"eventType", env.EventType, "aggregateId", env.AggregateID, "outcome", outcome)
		return nil
	}

	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
	}, logger)
	ports.Register(srv.Echo, repo)
	admin.RegisterConsumer(srv.Admin(), db, cfg.ConsumerGroup, dead)
	admin.RegisterFailPoints(srv.Admin(), fp)

	c := consumerLoop{cfg: cfg, dead: dead, metrics: messaging.NewMetrics(reg), logger: logger, handle: handle}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return c.run(ctx) })
	logger.InfoContext(ctx, "points service started", "addr", cfg.HTTPAddr, "topic", cfg.OrderEventsTopic)
	return g.Wait()
}

// consumerLoop keeps the router running while the broker comes and goes:
// the service starts, and serves HTTP, even when the broker is down.
type consumerLoop struct {
	cfg     config
	dead    *dlq.Store
	metrics *messaging.Metrics
	logger  *slog.Logger
	handle  messaging.EventHandler
}

// errRouter marks a router that cannot be built: a configuration problem
// that no reconnect cures.
var errRouter = errors.New("build router")

func (c consumerLoop) run(ctx context.Context) error {
	delay := reconnectInitial
	for {
		err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errRouter) {
			return err
		}
		c.logger.WarnContext(ctx, reconnectWarning, "error", err, "retryIn", delay.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, reconnectMax)
	}
}

// runOnce connects to the broker and runs the router until ctx ends or the
// connection is lost. Creating the DLQ publisher is the connectivity probe:
// it fails fast while the broker is unreachable.
func (c consumerLoop) runOnce(ctx context.Context) error {
	wlogger := watermill.NewSlogLoggerWithLevelMapping(c.logger,
		map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
	pub, err := messaging.NewPublisher(c.cfg.Brokers, wlogger)
	if err != nil {
		return fmt.Errorf("create DLQ publisher: %w", err)
	}
	defer pub.Close()
	sub, err := messaging.NewSubscriber(c.cfg.Brokers, c.cfg.ConsumerGroup, wlogger)
	if err != nil {
		return fmt.Errorf("create subscriber: %w", err)
	}
	defer sub.Close()
	router, err := messaging.NewRouter(c.cfg.consumer(), sub, pub, c.dead, c.metrics, c.logger, c.handle)
	if err != nil {
		return fmt.Errorf("%w: %w", errRouter, err)
	}
	if err := router.Run(ctx); err != nil {
		return fmt.Errorf("run router: %w", err)
	}
	if ctx.Err() == nil {
		return errors.New("router stopped")
	}
	return nil
}
