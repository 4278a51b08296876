package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// config is the payment service's whole environment (README.md, Configuration).
type config struct {
	DatabaseURL    string
	DBName         string
	HTTPAddr       string
	OrderURL       string
	CallbackSecret string
	AdminToken     string
	LogLevel       string
	FailPoints     string
	Consumer       consumer.Env
	Relay          outbox.RelayConfig
}

// loadConfig reads the environment through getenv, applies the documented
// defaults and reports every malformed value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	cfg := config{
		DatabaseURL:    r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:         r.String("DB_NAME", "payments"),
		HTTPAddr:       r.String("HTTP_ADDR", ":8082"),
		OrderURL:       strings.TrimRight(r.String("ORDER_URL", "http://127.0.0.1:8081"), "/"),
		CallbackSecret: r.String("CALLBACK_SECRET", "dev-callback-secret"),
		AdminToken:     r.String("ADMIN_TOKEN", ""),
		LogLevel:       strings.ToLower(r.String("LOG_LEVEL", "info")),
		FailPoints:     r.String("FAILPOINTS", ""),
		Consumer:       consumer.ReadEnv(r, "payment-service"),
		Relay:          outbox.ReadRelayEnv(r),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, err
	}
	// The relay listens for the outbox's commit notifications on the
	// service's own database (an unusable URL was reported just above).
	cfg.Relay.ListenURL, _ = postgres.WithDatabase(cfg.DatabaseURL, cfg.DBName)
	return cfg, nil
}

// Validate reports every unusable setting, so the service refuses to start
// with one clear message instead of failing later.
func (c config) Validate() error {
	var errs []error
	if _, err := postgres.WithDatabase(c.DatabaseURL, c.DBName); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if u, err := url.Parse(c.OrderURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("ORDER_URL=%q: want an absolute http(s) URL", c.OrderURL))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if err := c.Relay.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(append(errs, c.Consumer.Validate())...)
}
