package main

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// serviceName names the console in its logs.
const serviceName = "console"

// Port is the console's default port (README.md, Ports).
const Port = 8087

// config is the console's environment (README.md, Configuration).
type config struct {
	// Mode is SUITE_MODE: outside development mode ADMIN_TOKEN is
	// required, of the console's users and by the services.
	Mode string
	// HTTPAddr (HTTP_ADDR) is where the console listens: 127.0.0.1:8087
	// in development mode, :8087 otherwise.
	HTTPAddr string
	// AdminToken (ADMIN_TOKEN) is the services' admin token: the console
	// sends it to their /admin routes and asks it of its own users.
	AdminToken string
	LogLevel   string
	// URLs are the services' base URLs by short name (ORDER_URL, …).
	URLs map[string]string
	// UpstreamTimeout (CONSOLE_UPSTREAM_TIMEOUT) bounds one call to a
	// service.
	UpstreamTimeout time.Duration
	// ControlURL (CONTROL_URL) is the runner's control API, for the
	// stop, start and scale switches and the crash drills; empty: none.
	ControlURL string
	// Brokers (KAFKA_BROKERS), Topic (ORDER_EVENTS_TOPIC) and DLQTopic
	// (DLQ_TOPIC) are where the drills publish and look.
	Brokers         []string
	Topic, DLQTopic string
	// CallbackSecret (CALLBACK_SECRET) signs the drills' callbacks; empty
	// takes the development one.
	CallbackSecret string
	// DatabaseURL (DATABASE_URL) is the services' Postgres server, on
	// which the drills remove the orders they planted; empty: they leave
	// them. DatabasePassword (DATABASE_PASSWORD) is its user's password
	// when the URL holds none.
	DatabaseURL      string
	DatabasePassword string
	// Monitor is how often the consumers' lag is sampled
	// (CONSOLE_SAMPLE_INTERVAL) and how many samples are kept
	// (CONSOLE_SAMPLE_HISTORY).
	Monitor app.MonitorConfig
	// Retry and ParkDeadline are the consumers' settings as the suite reads
	// them (RETRY_MAX_ATTEMPTS, RETRY_INITIAL_INTERVAL, RETRY_MAX_INTERVAL,
	// PARK_DEADLINE; the consumers' defaults when unset): the drills'
	// waits follow them.
	RetryMaxAttempts     int
	RetryInitialInterval time.Duration
	RetryMaxInterval     time.Duration
	ParkDeadline         time.Duration
}

// ServerURL is DATABASE_URL with DATABASE_PASSWORD in it; empty without a
// DATABASE_URL.
func (c config) ServerURL() (string, error) {
	if c.DatabaseURL == "" {
		return "", nil
	}
	return postgres.WithPassword(c.DatabaseURL, c.DatabasePassword)
}

// defaultURLs are the services' URLs under `make run`.
var defaultURLs = []struct{ name, env, url string }{
	{suiteapi.Order, "ORDER_URL", "http://127.0.0.1:8081"},
	{suiteapi.Payment, "PAYMENT_URL", "http://127.0.0.1:8082"},
	{suiteapi.Inventory, "INVENTORY_URL", "http://127.0.0.1:8083"},
	{suiteapi.Points, "POINTS_URL", "http://127.0.0.1:8084"},
	{suiteapi.Notification, "NOTIFICATION_URL", "http://127.0.0.1:8085"},
	{suiteapi.Reconciliation, "RECONCILIATION_URL", "http://127.0.0.1:8086"},
}

// loadConfig reads the environment through getenv, the only place the
// console does, and reports every malformed or unusable value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	mode := strings.ToLower(r.String("SUITE_MODE", service.ModeProduction))
	addr := fmt.Sprintf(":%d", Port)
	if mode == service.ModeDevelopment {
		addr = fmt.Sprintf("127.0.0.1:%d", Port)
	}
	cfg := config{
		Mode:            mode,
		HTTPAddr:        r.String("HTTP_ADDR", addr),
		AdminToken:      r.Secret("ADMIN_TOKEN", ""),
		LogLevel:        strings.ToLower(r.String("LOG_LEVEL", "info")),
		URLs:            map[string]string{},
		UpstreamTimeout: r.Duration("CONSOLE_UPSTREAM_TIMEOUT", 5*time.Second),
		Brokers:         r.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		Topic:           r.String("ORDER_EVENTS_TOPIC", "order-events"),
		DLQTopic:        r.String("DLQ_TOPIC", "order-events.dlq"),
		CallbackSecret:  r.Secret("CALLBACK_SECRET", ""),
	}
	if v := r.String("CONTROL_URL", ""); v != "" {
		cfg.ControlURL = r.URL("CONTROL_URL", "")
	}
	mon := app.DefaultMonitorConfig()
	cfg.Monitor = app.MonitorConfig{
		Interval: r.Duration("CONSOLE_SAMPLE_INTERVAL", mon.Interval),
		History:  r.Int("CONSOLE_SAMPLE_HISTORY", mon.History),
		Idle:     mon.Idle,
	}
	cfg.RetryMaxAttempts = r.Int("RETRY_MAX_ATTEMPTS", drill.DefaultRetryMaxAttempts)
	cfg.RetryInitialInterval = r.Duration("RETRY_INITIAL_INTERVAL", drill.DefaultRetryInitial)
	cfg.RetryMaxInterval = r.Duration("RETRY_MAX_INTERVAL", drill.DefaultRetryMax)
	cfg.ParkDeadline = r.Duration("PARK_DEADLINE", drill.DefaultParkDeadline)
	cfg.DatabaseURL = r.String("DATABASE_URL", "")
	cfg.DatabasePassword = r.Secret("DATABASE_PASSWORD", "")
	for _, u := range defaultURLs {
		cfg.URLs[u.name] = r.URL(u.env, u.url)
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Development reports SUITE_MODE=development.
func (c config) Development() bool { return c.Mode == service.ModeDevelopment }

// Validate reports every setting the console cannot start with. Outside
// development mode ADMIN_TOKEN must be a real secret; in development mode
// a console reachable beyond this machine needs one too, since it can
// replay dead letters and arm fail points.
func (c config) Validate() error {
	var errs []error
	switch c.Mode {
	case service.ModeProduction, service.ModeDevelopment:
	default:
		errs = append(errs, fmt.Errorf("SUITE_MODE=%q: want %s or %s", c.Mode, service.ModeProduction, service.ModeDevelopment))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTP_ADDR=%q: %w", c.HTTPAddr, err))
	}
	switch {
	case !c.Development():
		errs = append(errs, service.CheckSecret("ADMIN_TOKEN", c.AdminToken))
	case c.AdminToken == "" && !service.IsLoopback(c.HTTPAddr):
		errs = append(errs, fmt.Errorf("ADMIN_TOKEN is not set and HTTP_ADDR=%q listens beyond loopback: set ADMIN_TOKEN, or listen on 127.0.0.1", c.HTTPAddr))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if c.Monitor.Interval < 500*time.Millisecond || c.Monitor.Interval > time.Minute {
		errs = append(errs, fmt.Errorf("CONSOLE_SAMPLE_INTERVAL=%s: want 500ms to 1m", c.Monitor.Interval))
	}
	if c.Monitor.History < 10 || c.Monitor.History > 10_000 {
		errs = append(errs, fmt.Errorf("CONSOLE_SAMPLE_HISTORY=%d: want 10 to 10000", c.Monitor.History))
	}
	if err := c.drillTarget(nil).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("the drills' settings (KAFKA_BROKERS, RETRY_*, PARK_DEADLINE): %w", err))
	}
	if _, err := c.ServerURL(); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if !c.Development() && c.CallbackSecret != "" {
		errs = append(errs, service.CheckSecret("CALLBACK_SECRET", c.CallbackSecret))
	}
	if c.UpstreamTimeout < 100*time.Millisecond || c.UpstreamTimeout > time.Minute {
		errs = append(errs, fmt.Errorf("CONSOLE_UPSTREAM_TIMEOUT=%s: want 100ms to 1m", c.UpstreamTimeout))
	}
	return errors.Join(errs...)
}

// drillTarget is the suite the drills run against; databases are the
// services' databases (none: the drills leave what they plant).
func (c config) drillTarget(databases map[string]string) drill.Target {
	secret := c.CallbackSecret
	if secret == "" && c.Development() {
		secret = service.DevCallbackSecret
	}
	return drill.Target{
		URLs: c.URLs, Brokers: c.Brokers, Topic: c.Topic, DLQTopic: c.DLQTopic,
		AdminToken: c.AdminToken, CallbackSecret: secret,
		RetryMaxAttempts: c.RetryMaxAttempts, RetryInitialInterval: c.RetryInitialInterval,
		RetryMaxInterval: c.RetryMaxInterval, ParkDeadline: c.ParkDeadline,
		Databases: databases,
	}
}
