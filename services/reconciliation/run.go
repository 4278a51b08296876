package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/ports"
)

// peerTimeout bounds one read of a service: a page of 500 orders' views.
const peerTimeout = 30 * time.Second

// run wires the service and serves until ctx ends: the HTTP API, the runs
// it starts, the convergence monitor and the scheduled runs, each owned by
// one errgroup.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	svc, err := service.New(ctx, cfg.Config, stdout, service.Options{
		Migrations: []postgres.MigrationSet{postgres.EmbeddedSet("reconciliation", migrations)},
		MapError:   ports.MapError,
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	store := adapters.NewStore(svc.DB)
	peers := adapters.NewPeers(&http.Client{Timeout: peerTimeout, Transport: httpapi.ClientTransport(8)}, cfg.Peers, cfg.AdminToken)
	reconciler, err := app.NewReconciler(cfg.App, peers, store, app.NewMetrics(svc.Registry), svc.Logger)
	if err != nil {
		return err
	}
	ports.NewHandler(reconciler, store).Register(svc.Admin)
	svc.Describe(ports.Operations()...)
	svc.Go(reconciler.Serve)
	svc.Retain(adapters.RetentionRules(cfg.RunRetention)...)
	svc.Go(app.NewMonitor(cfg.Monitor, reconciler, store).Run)
	if cfg.Interval > 0 {
		svc.Go(func(ctx context.Context) error { return schedule(ctx, cfg.Interval, reconciler, svc.Logger) })
	}
	return svc.Run(ctx, "deadline", cfg.App.Deadline, "interval", cfg.Interval)
}

// schedule starts a run over every order older than the deadline each
// interval, done by the reconciler's Serve like a requested one. A
// schedule that finds a run still going skips its turn; a run that fails
// (a service down, its own database away) is logged by the run, and the
// next one tries again.
func schedule(ctx context.Context, interval time.Duration, r *app.Reconciler, logger *slog.Logger) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_, err := r.Start(ctx, "schedule", rec.Scope{MinAge: r.Deadline()})
			switch {
			case errors.Is(err, app.ErrRunInProgress):
				logger.InfoContext(ctx, "scheduled reconciliation run skipped", "reason", err)
			case err != nil && ctx.Err() == nil:
				logger.WarnContext(ctx, "scheduled reconciliation run did not start", "error", err)
			}
		}
	}
}
