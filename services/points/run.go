package main

import (
	"context"
	"errors"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	eventconsumer "github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/consumer"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
	"github.com/reliable-orders/fulfillment/services/points/internal/storage"
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
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{MaxOpen: cfg.Consumer.DBMaxConns},
		inbox.Schema(), versionguard.Schema(), dlq.Schema(), postgres.EmbeddedSet("points", migrations))
	if err != nil {
		return err
	}
	defer db.Close()

	repo := storage.New(db, cfg.Consumer.ConsumerGroup)
	dead := dlq.NewStore(db)
	dlqPub := messaging.NewLazyPublisher(cfg.Consumer.Brokers, messaging.WatermillLogger(logger))
	cons := consumer.New(repo, fp, logger)
	guard := versionguard.NewBatch(cfg.Consumer.ConsumerGroup, cons.Transitions(), cons.Apply)
	proc := inbox.NewProcessor(db, cfg.Consumer.ConsumerGroup, guard)
	// The batcher applies the in-flight events of every partition in one
	// transaction (CONSUMER_BATCH_SIZE=1: one transaction per event).
	batcher := inbox.NewBatchProcessor(proc, inbox.BatchConfig{
		MaxBatch: cfg.Consumer.BatchSize, Linger: cfg.Consumer.BatchLinger,
	}, reg)
	handle := func(ctx context.Context, env event.Envelope) (versionguard.Outcome, error) {
		outcome, err := batcher.Process(ctx, env)
		if err != nil {
			return "", err
		}
		logger.DebugContext(ctx, "event processed",
			"eventType", env.EventType, "aggregateId", env.AggregateID, "outcome", outcome)
		return outcome, nil
	}

	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
	}, logger)
	ports.Register(srv.Echo, repo)
	admin.RegisterConsumer(srv.Admin(), db, cfg.Consumer.ConsumerGroup, dead)
	admin.RegisterReplay(srv.Admin(), dead, dlqPub)
	admin.RegisterFailPoints(srv.Admin(), fp)
	ports.RegisterReconciliation(srv.Admin(), repo, admin.NewFactsReader(db, cfg.Consumer.ConsumerGroup))
	lagMonitor := lag.Register(srv.Admin(), reg, lag.Config{Brokers: cfg.Consumer.Brokers,
		Group: cfg.Consumer.ConsumerGroup, Topic: cfg.Consumer.OrderEventsTopic})

	consumerRuntime := cfg.Consumer.Runtime(dlqPub, dead, eventconsumer.NewMetrics(lagMonitor.Registerer()), logger, handle)
	consumerRuntime.Config.FailPoints = fp
	consumerRuntime.Parked, consumerRuntime.DB = proc, db
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return batcher.Run(ctx) })
	g.Go(func() error { return eventconsumer.Run(ctx, consumerRuntime) })
	g.Go(func() error { return lagMonitor.Run(ctx) })
	logger.InfoContext(ctx, "points service started", "addr", cfg.HTTPAddr, "topic", cfg.Consumer.OrderEventsTopic)
	err = g.Wait()
	return errors.Join(err, dlqPub.Close())
}
