package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// Env is the part of a consumer service's environment that every
// consumer shares (README.md, Configuration). It is read and checked here, so
// the names, defaults and rules are the same in every service.
type Env struct {
	messaging.Env
	DLQTopic      string
	ConsumerGroup string
	Retry         RetryConfig
	Parking       ParkingConfig
	// BatchSize bounds the events applied in one transaction
	// (CONSUMER_BATCH_SIZE); 1 is one transaction per event, the baseline.
	BatchSize int
	// BatchLinger is how long a batch waits for more events after its first
	// (CONSUMER_BATCH_LINGER).
	BatchLinger time.Duration
	// BatchWorkers is how many batches may be in their transactions at
	// once (CONSUMER_BATCH_WORKERS).
	BatchWorkers int
	// Window is how many events of one partition may be in flight at once
	// (CONSUMER_PARTITION_WINDOW); events of one order never are.
	Window int
	// DBMaxConns bounds the service's database connections (DB_MAX_CONNS).
	// A batching consumer needs two or three; six instances of three
	// consumers must fit in Postgres's default max_connections of 100.
	DBMaxConns int
}

// Defaults and bounds of the batch settings (docs/decisions.md, Batching).
const (
	DefaultBatchSize    = 256
	DefaultBatchLinger  = 2 * time.Millisecond
	DefaultBatchWorkers = 2
	maxBatchWorkers     = 16
	maxBatchSize        = 10_000
	maxBatchLinger      = time.Second
	DefaultDBMaxConns   = 8
)

// ReadEnv reads KAFKA_BROKERS, ORDER_EVENTS_TOPIC, DLQ_TOPIC,
// CONSUMER_GROUP (defaultGroup when unset), RETRY_MAX_ATTEMPTS,
// RETRY_INITIAL_INTERVAL, RETRY_MAX_INTERVAL, PARK_DEADLINE and
// PARK_SWEEP_INTERVAL, CONSUMER_BATCH_SIZE, CONSUMER_BATCH_LINGER,
// CONSUMER_BATCH_WORKERS, CONSUMER_PARTITION_WINDOW and DB_MAX_CONNS through
// r, which collects the malformed values with the service's own.
func ReadEnv(r *envconfig.Reader, defaultGroup string) Env {
	retry := DefaultRetryConfig()
	parking := DefaultParkingConfig()
	return Env{
		Env:           messaging.ReadEnv(r),
		DLQTopic:      r.String("DLQ_TOPIC", "order-events.dlq"),
		ConsumerGroup: r.String("CONSUMER_GROUP", defaultGroup),
		Retry: RetryConfig{
			MaxAttempts:     r.Int("RETRY_MAX_ATTEMPTS", retry.MaxAttempts),
			InitialInterval: r.Duration("RETRY_INITIAL_INTERVAL", retry.InitialInterval),
			MaxInterval:     r.Duration("RETRY_MAX_INTERVAL", retry.MaxInterval),
		},
		Parking: ParkingConfig{
			Deadline:      r.Duration("PARK_DEADLINE", parking.Deadline),
			SweepInterval: r.Duration("PARK_SWEEP_INTERVAL", parking.SweepInterval),
		},
		BatchSize:    r.Int("CONSUMER_BATCH_SIZE", DefaultBatchSize),
		BatchLinger:  r.Duration("CONSUMER_BATCH_LINGER", DefaultBatchLinger),
		BatchWorkers: r.Int("CONSUMER_BATCH_WORKERS", DefaultBatchWorkers),
		Window:       r.Int("CONSUMER_PARTITION_WINDOW", messaging.DefaultWindow),
		DBMaxConns:   r.Int("DB_MAX_CONNS", DefaultDBMaxConns),
	}
}

// Validate reports every unusable setting, naming its variable.
func (e Env) Validate() error {
	var errs []error
	if err := e.Env.Validate(); err != nil {
		errs = append(errs, err)
	}
	if e.OrderEventsTopic == e.DLQTopic {
		errs = append(errs, errors.New("DLQ_TOPIC must differ from ORDER_EVENTS_TOPIC"))
	}
	if err := e.Config().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("RETRY_*: %w", err))
	}
	if err := e.Parking.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("PARK_DEADLINE, PARK_SWEEP_INTERVAL: %w", err))
	}
	if e.BatchSize < 1 || e.BatchSize > maxBatchSize {
		errs = append(errs, fmt.Errorf("CONSUMER_BATCH_SIZE=%d: want 1 (batching off) to %d", e.BatchSize, maxBatchSize))
	}
	if e.BatchWorkers < 1 || e.BatchWorkers > maxBatchWorkers {
		errs = append(errs, fmt.Errorf("CONSUMER_BATCH_WORKERS=%d: want 1 to %d", e.BatchWorkers, maxBatchWorkers))
	} else if e.DBMaxConns < e.BatchWorkers+1 {
		errs = append(errs, fmt.Errorf("DB_MAX_CONNS=%d: want at least %d (CONSUMER_BATCH_WORKERS=%d batch workers and the gap sweeper)",
			e.DBMaxConns, e.BatchWorkers+1, e.BatchWorkers))
	}
	if e.Window < 1 || e.Window > messaging.MaxWindow {
		errs = append(errs, fmt.Errorf("CONSUMER_PARTITION_WINDOW=%d: want 1 to %d", e.Window, messaging.MaxWindow))
	}
	if e.BatchLinger < 0 || e.BatchLinger > maxBatchLinger {
		errs = append(errs, fmt.Errorf("CONSUMER_BATCH_LINGER=%s: want 0 to %s", e.BatchLinger, maxBatchLinger))
	}
	return errors.Join(errs...)
}

// Config is the router's configuration. The consumer is named after
// its group, so its dedup rows and DLQ records name the group.
func (e Env) Config() Config {
	return Config{
		Consumer: e.ConsumerGroup,
		Topic:    e.OrderEventsTopic,
		DLQTopic: e.DLQTopic,
		Retry:    e.Retry,
	}
}

// Deps are what a consumer's Runtime needs besides its settings.
type Deps struct {
	// Handle applies one valid event.
	Handle EventHandler
	// Handles, optional, tells the event types Handle has any use for
	// (Runtime.Handles).
	Handles func(event.Type) bool
	// DLQ publishes dead letters; Recorder keeps them.
	DLQ      message.Publisher
	Recorder DeadLetterRecorder
	Metrics  *Metrics
	Logger   *slog.Logger
	// FailPoints, optional, arms the router's crash windows.
	FailPoints *failpoint.Registry
	// Parked and DB, optional, have events parked longer than
	// PARK_DEADLINE dead-lettered.
	Parked ParkedEvents
	DB     *sqlx.DB
	// Tracing, optional, records a span of each message.
	Tracing trace.TracerProvider
}

// Runtime is what Run needs to consume these settings' topic with d.
func (e Env) Runtime(d Deps) Runtime {
	cfg := e.Config()
	cfg.FailPoints = d.FailPoints
	cfg.Tracing = d.Tracing
	return Runtime{
		Brokers:  e.Brokers,
		Group:    e.ConsumerGroup,
		Window:   e.Window,
		Config:   cfg,
		DLQ:      d.DLQ,
		Recorder: d.Recorder,
		Metrics:  d.Metrics,
		Logger:   d.Logger,
		Handle:   d.Handle,
		Handles:  d.Handles,
		Parking:  e.Parking,
		Parked:   d.Parked,
		DB:       d.DB,
	}
}
