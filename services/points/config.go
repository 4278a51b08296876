package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// config is every setting of the service (README.md, Configuration).
type config struct {
	DatabaseURL string
	DBName      string
	HTTPAddr    string
	AdminToken  string
	LogLevel    string
	FailPoints  string
	Consumer    consumer.Env
}

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed or missing value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	cfg := config{
		DatabaseURL: r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:      r.String("DB_NAME", "points"),
		HTTPAddr:    r.String("HTTP_ADDR", ":8084"),
		AdminToken:  r.String("ADMIN_TOKEN", ""),
		LogLevel:    r.String("LOG_LEVEL", "info"),
		FailPoints:  r.String("FAILPOINTS", ""),
		Consumer:    consumer.ReadEnv(r, "points-service"),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every unusable setting.
func (c config) Validate() error {
	var errs []error
	if _, err := postgres.WithDatabase(c.DatabaseURL, c.DBName); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if c.DBName == "" || len(c.DBName) > 63 {
		errs = append(errs, errors.New("DB_NAME must be 1-63 characters"))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTP_ADDR=%q: %w", c.HTTPAddr, err))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if _, err := failpoint.Parse(c.FailPoints); err != nil {
		errs = append(errs, fmt.Errorf("FAILPOINTS: %w", err))
	}
	return errors.Join(append(errs, c.Consumer.Validate())...)
}
