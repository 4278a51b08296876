package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
)

// serviceName names the service in logs.
const serviceName = "reconciliation-service"

// config is the reconciliation service's environment (README.md,
// Configuration).
type config struct {
	service.Config
	Peers   adapters.PeerURLs
	App     app.Config
	Monitor app.MonitorConfig
	// Interval is how often a scheduled run starts; 0: only on request.
	Interval time.Duration
	// RunRetention (RETENTION_RECONCILIATION_RUNS) is how long a finished
	// run and its findings are kept.
	RunRetention time.Duration
}

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed or unusable value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	a := app.DefaultConfig()
	a.Deadline = r.Duration("CONVERGENCE_DEADLINE", a.Deadline)
	a.PageSize = r.Int("RECONCILIATION_PAGE_SIZE", a.PageSize)
	cfg := config{
		Config: service.ReadConfig(r, service.Identity{Name: serviceName, Database: "reconciliation", Port: 8086}),
		Peers: adapters.PeerURLs{
			Order:        r.URL("ORDER_URL", "http://127.0.0.1:8081"),
			Payment:      r.URL("PAYMENT_URL", "http://127.0.0.1:8082"),
			Inventory:    r.URL("INVENTORY_URL", "http://127.0.0.1:8083"),
			Points:       r.URL("POINTS_URL", "http://127.0.0.1:8084"),
			Notification: r.URL("NOTIFICATION_URL", "http://127.0.0.1:8085"),
		},
		App: a,
		Monitor: app.MonitorConfig{
			Interval:  r.Duration("CONVERGENCE_CHECK_INTERVAL", 5*time.Second),
			MaxOrders: 5000,
			MaxChecks: 1000,
		},
		Interval:     r.Duration("RECONCILIATION_INTERVAL", 5*time.Minute),
		RunRetention: r.Duration("RETENTION_RECONCILIATION_RUNS", adapters.DefaultRunRetention),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every setting the service cannot start with.
func (c config) Validate() error {
	errs := []error{c.Config.Validate()}
	if err := c.App.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("CONVERGENCE_DEADLINE, RECONCILIATION_PAGE_SIZE: %w", err))
	}
	if c.Monitor.Interval <= 0 {
		errs = append(errs, fmt.Errorf("CONVERGENCE_CHECK_INTERVAL=%s: must be positive", c.Monitor.Interval))
	}
	if c.Interval < 0 {
		errs = append(errs, fmt.Errorf("RECONCILIATION_INTERVAL=%s: must not be negative (0 runs only on request)", c.Interval))
	}
	if c.RunRetention < service.MinRetention || c.RunRetention > service.MaxRetention {
		errs = append(errs, fmt.Errorf("RETENTION_RECONCILIATION_RUNS=%s: want %s to %s", c.RunRetention, service.MinRetention, service.MaxRetention))
	}
	return errors.Join(errs...)
}
