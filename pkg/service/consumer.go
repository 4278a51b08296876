package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// ConsumerConfig is the environment of a consumer service: what every
// service shares and what every consumer shares.
type ConsumerConfig struct {
	Config
	Consumer consumer.Env
}

// ReadConsumerConfig reads a consumer service's shared settings through r;
// the default consumer group is id.Name. The consumer kit's fail point
// (consumer.FailPointAfterCommit) joins id.FailPoints.
func ReadConsumerConfig(r *envconfig.Reader, id Identity) ConsumerConfig {
	id.FailPoints = append(slices.Clone(id.FailPoints), consumer.FailPointAfterCommit)
	return ConsumerConfig{Config: ReadConfig(r, id), Consumer: consumer.ReadEnv(r, id.Name)}
}

// Validate reports every unusable setting, naming its variable.
func (c ConsumerConfig) Validate() error {
	return errors.Join(c.Config.Validate(), c.Consumer.Validate())
}

// LoadConsumerConfig reads and checks a consumer service's environment
// when it has no settings of its own.
func LoadConsumerConfig(getenv func(string) string, id Identity) (ConsumerConfig, error) {
	r := envconfig.New(getenv)
	cfg := ReadConsumerConfig(r, id)
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return ConsumerConfig{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Events is what a consumer service does with the order events: its state
// machine and its effect. Set Apply or ApplyBatch.
type Events struct {
	// Transitions is the consumer's state machine: for each event type it
	// handles, the states it applies it from.
	Transitions versionguard.Transitions
	// Apply applies one event at a time, in the unit of work of its dedup
	// row, which it is handed as ApplyBatch is.
	Apply versionguard.ApplyFunc
	// ApplyBatch applies the events of distinct orders at once, in the
	// unit of work of their dedup rows, which it is handed: its
	// transaction for the adapters, and the work to run just before the
	// commit or after it.
	ApplyBatch versionguard.BatchApplyFunc
	// LateFacts, when set, applies the per-fact effect of an event older
	// than the consumer's version instead of ignoring it (a refund told
	// to the customer after a later one was).
	LateFacts versionguard.LateFacts
}

func (e Events) validate() error {
	if len(e.Transitions) == 0 || (e.Apply == nil) == (e.ApplyBatch == nil) {
		return errors.New("events need transitions and one of Apply and ApplyBatch")
	}
	return nil
}

// Consumer is a started consumer service: the shared parts, the dead
// letters with their replay, and the lag monitor, ready to run the events.
type Consumer struct {
	*Service
	// Group is the consumer group, which also names the dedup rows, the
	// version guard's rows and the dead letters.
	Group string
	// DLQ keeps the dead letters.
	DLQ *dlq.Store

	env     consumer.Env
	dlqPub  *messaging.LazyPublisher
	monitor *lag.Monitor
}

// NewConsumer opens a consumer service: New's parts with the inbox,
// version guard and dead-letter tables migrated before migrations (the
// service's own), GET /admin/processed-events/{eventId}, GET /admin/dlq,
// POST /admin/dlq/{id}/replay and GET /admin/lag. Dedup rows are deleted
// after RETENTION_PROCESSED_EVENTS, replayed dead letters after
// RETENTION_DEAD_LETTERS.
func NewConsumer(ctx context.Context, cfg ConsumerConfig, stdout io.Writer, opts Options) (*Consumer, error) {
	if err := cfg.Consumer.Validate(); err != nil {
		return nil, err
	}
	opts.Migrations = append([]postgres.MigrationSet{inbox.Schema(), versionguard.Schema(), dlq.Schema()}, opts.Migrations...)
	// The router fires the kit's fail point whatever the config was read
	// with; declaring a name twice is harmless.
	cfg.FailPointNames = append(slices.Clone(cfg.FailPointNames), consumer.FailPointAfterCommit)
	opts.Pool = postgres.PoolConfig{MaxOpen: cfg.Consumer.DBMaxConns}
	s, err := New(ctx, cfg.Config, stdout, opts)
	if err != nil {
		return nil, err
	}
	c := &Consumer{
		Service: s,
		Group:   cfg.Consumer.ConsumerGroup,
		// A replay answers what the consumer did with the event.
		DLQ: dlq.NewStore(s.DB).WithOutcomes(inbox.NewOutcomes(s.DB), dlq.DefaultReplayWait),
		env: cfg.Consumer,
		// The DLQ publisher connects lazily, so the service starts and
		// serves while the broker is away, and replay shares it.
		dlqPub: messaging.NewLazyPublisher(cfg.Consumer.Brokers, messaging.WatermillLogger(s.Logger)),
	}
	s.Retain(inbox.RetentionRule(s.Config.Retention.ProcessedEvents), dlq.RetentionRule(s.Config.Retention.DeadLetters))
	admin.RegisterConsumer(s.Admin, s.DB, c.Group, c.DLQ)
	admin.RegisterReplay(s.Admin, c.DLQ, c.dlqPub)
	c.monitor = lag.Register(s.Admin, s.Registry, lag.Config{Brokers: cfg.Consumer.Brokers,
		Group: c.Group, Topic: cfg.Consumer.OrderEventsTopic})
	s.Describe(append(admin.ConsumerOperations(), lag.Operations()...)...)
	return c, nil
}

// Facts reads what the consumer knows of orders (its version guard's
// position and its dead letters), for the service's reconciliation view.
func (c *Consumer) Facts() *admin.FactsReader {
	return admin.NewFactsReader(c.DB, c.Group)
}

// Run consumes the order events with events until ctx ends: each event is
// deduplicated, ordered by the version guard and applied in one
// transaction (batched across partitions up to CONSUMER_BATCH_SIZE),
// acknowledged after the commit, retried, dead-lettered past the bound or
// parked until its gap fills (and dead-lettered past PARK_DEADLINE).
// It returns nil on a clean shutdown.
func (c *Consumer) Run(ctx context.Context, events Events) error {
	if err := events.validate(); err != nil {
		return fmt.Errorf("consumer %s: %w", c.Group, err)
	}
	guard := versionguard.New(c.Group, events.Transitions, events.Apply)
	if events.ApplyBatch != nil {
		guard = versionguard.NewBatch(c.Group, events.Transitions, events.ApplyBatch)
	}
	guard.WithLateFacts(events.LateFacts)
	proc := inbox.NewProcessor(c.DB, c.Group, guard)
	batcher := inbox.NewBatchProcessor(proc, inbox.BatchConfig{
		MaxBatch: c.env.BatchSize, Linger: c.env.BatchLinger, Workers: c.env.BatchWorkers,
	}, c.Registry)
	handle := func(ctx context.Context, env event.Envelope) (versionguard.Outcome, error) {
		outcome, err := batcher.Process(ctx, env)
		if err != nil {
			return "", err
		}
		c.Logger.DebugContext(ctx, "event processed",
			"eventType", env.EventType, "aggregateId", env.AggregateID, "outcome", outcome)
		return outcome, nil
	}
	rt := c.env.Runtime(consumer.Deps{Handle: handle, Handles: events.Transitions.Handles, DLQ: c.dlqPub, Recorder: c.DLQ,
		Metrics: consumer.NewMetrics(c.monitor.Registerer()), Logger: c.Logger,
		FailPoints: c.FailPoints, Parked: proc, DB: c.DB, Tracing: c.Tracing.Provider()})
	c.Go(batcher.Run)
	c.Go(func(ctx context.Context) error { return consumer.Run(ctx, rt) })
	c.Go(c.monitor.Run)
	err := c.Service.Run(ctx, "group", c.Group, "topic", c.env.OrderEventsTopic)
	return errors.Join(err, c.dlqPub.Close())
}
