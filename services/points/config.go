package main

import (
	"errors"
	"fmt"
	"net"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// config is every setting of the service (docs/configuration.md).
type config struct {
	DatabaseURL      string
	DBName           string
	Brokers          []string
	HTTPAddr         string
	OrderEventsTopic string
	DLQTopic         string
	ConsumerGroup    string
	AdminToken       string
	LogLevel         string
	FailPoints       string
	Retry            messaging.RetryConfig
}

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed or missing value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	retry := messaging.DefaultRetryConfig()
	cfg := config{
		DatabaseURL:      r.String("DATABASE_URL", postgres.DefaultServerURL),
		DBName:           r.String("DB_NAME", "points"),
		Brokers:          r.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		HTTPAddr:         r.String("HTTP_ADDR", ":8084"),
		OrderEventsTopic: r.String("ORDER_EVENTS_TOPIC", "order-events"),
		DLQTopic:         r.String("DLQ_TOPIC", "order-events.dlq"),
		ConsumerGroup:    r.String("CONSUMER_GROUP", "points-service"),
		AdminToken:       r.String("ADMIN_TOKEN", ""),
		LogLevel:         r.String("LOG_LEVEL", "info"),
		FailPoints:       r.String("FAILPOINTS", ""),
		Retry: messaging.RetryConfig{
			MaxAttempts:     r.Int("RETRY_MAX_ATTEMPTS", retry.MaxAttempts),
			InitialInterval: r.Duration("RETRY_INITIAL_INTERVAL", retry.InitialInterval),
			MaxInterval:     r.Duration("RETRY_MAX_INTERVAL", retry.MaxInterval),
		},
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
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS must name at least one broker"))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTP_ADDR=%q: %w", c.HTTPAddr, err))
	}
	if c.OrderEventsTopic == c.DLQTopic {
		errs = append(errs, errors.New("DLQ_TOPIC must differ from ORDER_EVENTS_TOPIC"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if _, err := failpoint.Parse(c.FailPoints); err != nil {
		errs = append(errs, fmt.Errorf("FAILPOINTS: %w", err))
	}
	if err := c.consumer().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("RETRY_*: %w", err))
	}
	return errors.Join(errs...)
}

// consumer is the router's configuration; the consumer's name is its
// consumer group, so dedup rows and DLQ records name the group.
func (c config) consumer() messaging.ConsumerConfig {
	return messaging.ConsumerConfig{
		Consumer: c.ConsumerGroup,
		Topic:    c.OrderEventsTopic,
		DLQTopic: c.DLQTopic,
		Retry:    c.Retry,
	}
}
