package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
)

// config is the reconciliation service's environment (README.md,
// Configuration).
type config struct {
	DatabaseURL string
	DBName      string
	HTTPAddr    string
	Peers       adapters.PeerURLs
	AdminToken  string
	LogLevel    string
	App         app.Config
	Monitor     app.MonitorConfig
	// Interval is how often a scheduled run starts; 0: only on request.
	Interval time.Duration
}

// loadConfig reads the environment through getenv, applying the documented
// defaults, and reports every malformed or unusable value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	a := app.DefaultConfig()
	a.Deadline = r.Duration("CONVERGENCE_DEADLINE", a.Deadline)
	a.PageSize = r.Int("RECONCILIATION_PAGE_SIZE", a.PageSize)
	cfg := config{
		DatabaseURL: r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:      r.String("DB_NAME", "reconciliation"),
		HTTPAddr:    r.String("HTTP_ADDR", ":8086"),
		Peers: adapters.PeerURLs{
			Order:        r.String("ORDER_URL", "http://127.0.0.1:8081"),
			Payment:      r.String("PAYMENT_URL", "http://127.0.0.1:8082"),
			Inventory:    r.String("INVENTORY_URL", "http://127.0.0.1:8083"),
			Points:       r.String("POINTS_URL", "http://127.0.0.1:8084"),
			Notification: r.String("NOTIFICATION_URL", "http://127.0.0.1:8085"),
		},
		AdminToken: r.String("ADMIN_TOKEN", ""),
		LogLevel:   strings.ToLower(r.String("LOG_LEVEL", "info")),
		App:        a,
		Monitor: app.MonitorConfig{
			Interval:  r.Duration("CONVERGENCE_CHECK_INTERVAL", 5*time.Second),
			MaxOrders: 5000,
			MaxChecks: 1000,
		},
		Interval: r.Duration("RECONCILIATION_INTERVAL", 5*time.Minute),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("reconciliation service configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every setting the service cannot start with.
func (c config) Validate() error {
	var errs []error
	if _, err := postgres.WithDatabase(c.DatabaseURL, c.DBName); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTP_ADDR=%q: %w", c.HTTPAddr, err))
	}
	for _, peer := range []struct{ name, url string }{
		{"ORDER_URL", c.Peers.Order}, {"PAYMENT_URL", c.Peers.Payment}, {"INVENTORY_URL", c.Peers.Inventory},
		{"POINTS_URL", c.Peers.Points}, {"NOTIFICATION_URL", c.Peers.Notification},
	} {
		if p, err := url.Parse(peer.url); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want an http(s) URL", peer.name, peer.url))
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if err := c.App.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("CONVERGENCE_DEADLINE, RECONCILIATION_PAGE_SIZE: %w", err))
	}
	if c.Monitor.Interval <= 0 {
		errs = append(errs, fmt.Errorf("CONVERGENCE_CHECK_INTERVAL=%s: must be positive", c.Monitor.Interval))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("RECONCILIATION_INTERVAL=%s: must not be negative (0 runs only on request)", c.Interval))
	}
	return errors.Join(errs...)
}
