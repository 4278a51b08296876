package main

import (
	"context"
	"io"
	"net/http"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/service"
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
	deps := ports.Deps{
		Timelines:   app.NewTimelines(app.DefaultTimelineConfig(), client),
		DeadLetters: app.NewDeadLetterQueue(client, logger),
	}
	if _, err := ports.Register(srv.Echo, ports.Config{AdminToken: cfg.AdminToken, Development: cfg.Development()}, deps); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(ctx) })
	logger.InfoContext(ctx, "console started", "addr", cfg.HTTPAddr, "mode", cfg.Mode)
	return g.Wait()
}
