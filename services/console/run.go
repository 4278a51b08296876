package main

import (
	"context"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
	"github.com/reliable-orders/fulfillment/services/console/internal/ports"
)

// run wires the console and serves until ctx ends. It returns nil on a
// clean shutdown.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := observability.NewLogger(stdout, serviceName, cfg.LogLevel)
	reg := observability.NewRegistry()
	// One attempt per call: a page shows what answered now, and the next
	// refresh asks again.
	client := suiteapi.New(suiteapi.Config{URLs: cfg.URLs, AdminToken: cfg.AdminToken, ShedRetries: -1,
		HTTPClient: &http.Client{Timeout: cfg.UpstreamTimeout}})
	defer client.Close()
	srv := httpapi.New(httpapi.Config{
		Addr:     cfg.HTTPAddr,
		Registry: reg,
		// On loopback in development mode the console has no login: only
		// this machine may name it (DNS rebinding), as the services.
		LoopbackHostOnly: cfg.Development() && service.IsLoopback(cfg.HTTPAddr),
	}, logger)
	server, err := cfg.ServerURL()
	if err != nil {
		return err
	}
	var databases map[string]string
	if server != "" {
		if databases, err = drill.LocalDatabases(server); err != nil {
			return err
		}
	}
	drills := app.DrillsConfig{Target: cfg.drillTarget(databases)}
	var control app.ControlAPI // nil without a control API: its switches are off
	if cfg.ControlURL != "" {
		// A start or a scale answers once the processes are ready; the
		// console answers its page before its own write timeout.
		control = controlapi.New(cfg.ControlURL, 40*time.Second)
		drills.Control = drill.NewControlClient(cfg.ControlURL, drill.DefaultTimeout)
	}
	monitor := app.NewMonitor(cfg.Monitor, client)
	drillRunner := app.NewDrills(drills, logger)
	deps := ports.Deps{
		Timelines:   app.NewTimelines(app.DefaultTimelineConfig(), client),
		DeadLetters: app.NewDeadLetterQueue(client, logger),
		Monitor:     monitor,
		Drills:      drillRunner,
		Switches:    app.NewSwitches(client, control, logger),
	}
	if _, err := ports.Register(srv.Echo, ports.Config{AdminToken: cfg.AdminToken, Development: cfg.Development()}, deps); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	g.Go(func() error { return monitor.Run(ctx) })
	g.Go(func() error { return drillRunner.Run(ctx) })
	logger.InfoContext(ctx, "console started", "addr", cfg.HTTPAddr, "mode", cfg.Mode)
	return g.Wait()
}
