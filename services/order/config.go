package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
)

// config is the order service's environment (README.md, Configuration).
type config struct {
	DatabaseURL      string
	DBName           string
	Brokers          []string
	HTTPAddr         string
	OrderEventsTopic string
	Peers            adapters.PeerURLs
	CallbackSecret   string
	AdminToken       string
	LogLevel         string
	Relay            outbox.RelayConfig
	FailPoints       string
}

// loadConfig reads the environment through getenv, applying the documented
// defaults, and reports every malformed or unusable value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	cfg := config{
		DatabaseURL:      r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:           r.String("DB_NAME", "orders"),
		Brokers:          r.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		HTTPAddr:         r.String("HTTP_ADDR", ":8081"),
		OrderEventsTopic: r.String("ORDER_EVENTS_TOPIC", "order-events"),
		Peers: adapters.PeerURLs{
			Payment:        r.String("PAYMENT_URL", "http://127.0.0.1:8082"),
			Inventory:      r.String("INVENTORY_URL", "http://127.0.0.1:8083"),
			Points:         r.String("POINTS_URL", "http://127.0.0.1:8084"),
			Notification:   r.String("NOTIFICATION_URL", "http://127.0.0.1:8085"),
			Reconciliation: r.String("RECONCILIATION_URL", "http://127.0.0.1:8086"),
		},
		CallbackSecret: r.String("CALLBACK_SECRET", "dev-callback-secret"),
		AdminToken:     r.String("ADMIN_TOKEN", ""),
		LogLevel:       r.String("LOG_LEVEL", "info"),
		Relay:          outbox.ReadRelayEnv(r),
		FailPoints:     r.String("FAILPOINTS", ""),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("order service configuration: %w", err)
	}
	// The relay listens for the outbox's commit notifications on the
	// service's own database (an unusable URL was reported just above).
	cfg.Relay.ListenURL, _ = postgres.WithDatabase(cfg.DatabaseURL, cfg.DBName)
	return cfg, nil
}

// Validate reports every setting the service cannot start with.
func (c config) Validate() error {
	var errs []error
	if _, err := postgres.WithDatabase(c.DatabaseURL, c.DBName); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS: at least one broker is required"))
	}
	for _, peer := range []struct{ name, url string }{
		{"PAYMENT_URL", c.Peers.Payment}, {"INVENTORY_URL", c.Peers.Inventory},
		{"POINTS_URL", c.Peers.Points}, {"NOTIFICATION_URL", c.Peers.Notification},
		{"RECONCILIATION_URL", c.Peers.Reconciliation},
	} {
		if p, err := url.Parse(peer.url); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			errs = append(errs, fmt.Errorf("%s=%q: want an http(s) URL", peer.name, peer.url))
		}
	}
	switch strings.ToLower(c.LogLevel) {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if err := c.Relay.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := failpoint.Parse(c.FailPoints); err != nil {
		errs = append(errs, fmt.Errorf("FAILPOINTS: %w", err))
	}
	return errors.Join(errs...)
}
