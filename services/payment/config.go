package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// config is the payment service's whole environment (docs/configuration.md).
type config struct {
	DatabaseURL      string
	DBName           string
	HTTPAddr         string
	Brokers          []string
	OrderEventsTopic string
	DLQTopic         string
	ConsumerGroup    string
	OrderURL         string
	CallbackSecret   string
	AdminToken       string
	LogLevel         string
	FailPoints       string
	Retry            messaging.RetryConfig
	Relay            outbox.RelayConfig
}

// loadConfig reads the environment through getenv, applies the documented
// defaults and reports every malformed value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	retry := messaging.DefaultRetryConfig()
	relay := outbox.DefaultRelayConfig()
	cfg := config{
		DatabaseURL:      r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:           r.String("DB_NAME", "payments"),
		HTTPAddr:         r.String("HTTP_ADDR", ":8082"),
		Brokers:          r.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		OrderEventsTopic: r.String("ORDER_EVENTS_TOPIC", "order-events"),
		DLQTopic:         r.String("DLQ_TOPIC", "order-events.dlq"),
		ConsumerGroup:    r.String("CONSUMER_GROUP", "payment-service"),
		OrderURL:         strings.TrimRight(r.String("ORDER_URL", "http://127.0.0.1:8081"), "/"),
		CallbackSecret:   r.String("CALLBACK_SECRET", "dev-callback-secret"),
		AdminToken:       r.String("ADMIN_TOKEN", ""),
		LogLevel:         strings.ToLower(r.String("LOG_LEVEL", "info")),
		FailPoints:       r.String("FAILPOINTS", ""),
		Retry: messaging.RetryConfig{
			MaxAttempts:     r.Int("RETRY_MAX_ATTEMPTS", retry.MaxAttempts),
			InitialInterval: r.Duration("RETRY_INITIAL_INTERVAL", retry.InitialInterval),
			MaxInterval:     r.Duration("RETRY_MAX_INTERVAL", retry.MaxInterval),
		},
		Relay: outbox.RelayConfig{
			BatchSize:      r.Int("OUTBOX_BATCH_SIZE", relay.BatchSize),
			PollInterval:   r.Duration("OUTBOX_POLL_INTERVAL", relay.PollInterval),
			BackoffInitial: r.Duration("OUTBOX_BACKOFF_INITIAL", relay.BackoffInitial),
			BackoffMax:     r.Duration("OUTBOX_BACKOFF_MAX", relay.BackoffMax),
			LockKey:        relay.LockKey,
		},
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, err
	}
	return cfg, nil
}

// Validate reports every unusable setting, so the service refuses to start
// with one clear message instead of failing later.
func (c config) Validate() error {
	var errs []error
	if _, err := postgres.WithDatabase(c.DatabaseURL, c.DBName); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS: at least one broker is required"))
	}
	if u, err := url.Parse(c.OrderURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("ORDER_URL=%q: want an absolute http(s) URL", c.OrderURL))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if err := c.Retry.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("RETRY_*: %w", err))
	}
	if err := c.Relay.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("OUTBOX_*: %w", err))
	}
	return errors.Join(errs...)
}
