package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/ports"
)

// serviceName is the name in logs.
const serviceName = "reconciliation-service"

// peerTimeout bounds one read of a service: a page of 500 orders' views.
const peerTimeout = 30 * time.Second

// run wires the service and serves until ctx ends: the HTTP API, the
// convergence monitor and the scheduled runs, each owned by one errgroup.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := observability.NewLogger(stdout, serviceName, cfg.LogLevel)
	reg := observability.NewRegistry()
	db, err := postgres.OpenService(ctx, cfg.DatabaseURL, cfg.DBName, postgres.PoolConfig{},
		postgres.EmbeddedSet("reconciliation", migrations))
	if err != nil {
		return err
	}
	defer db.Close()

	store := adapters.NewStore(db)
	peers := adapters.NewPeers(&http.Client{Timeout: peerTimeout, Transport: httpapi.ClientTransport(8)}, cfg.Peers, cfg.AdminToken)
	reconciler, err := app.NewReconciler(cfg.App, peers, store, app.NewMetrics(reg), logger)
	if err != nil {
		return err
	}
	monitor := app.NewMonitor(cfg.Monitor, reconciler, store)

	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
		MapError:   ports.MapError,
	}, logger)
	g, ctx := errgroup.WithContext(ctx)
	ports.NewHandler(ctx, reconciler, store).Register(srv.Admin())
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return monitor.Run(ctx) })
	if cfg.Interval > 0 {
		g.Go(func() error { return schedule(ctx, cfg.Interval, reconciler, logger) })
	}
	logger.InfoContext(ctx, "reconciliation service started", "addr", cfg.HTTPAddr, "deadline", cfg.App.Deadline,
		"interval", cfg.Interval)
	return g.Wait()
}

// schedule starts a run over every order older than the deadline each
// interval. A run that fails (a service down, its own database away) is
// logged, and the next one tries again.
func schedule(ctx context.Context, interval time.Duration, r *app.Reconciler, logger *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if _, err := r.Run(ctx, "schedule", rec.Scope{MinAge: r.Deadline()}); err != nil && ctx.Err() == nil {
				logger.WarnContext(ctx, "scheduled reconciliation run failed", "error", err)
			}
		}
	}
}
