package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// FailPointAfterCommit fires after the handler returned, so its
// transaction committed, and before the message is acknowledged: the
// consumer crash window of the tutorial ("effects committed, offset not").
// Armed with "exit", the message is delivered again after the restart; with
// "error", it is retried at once. Either way the redelivery is a duplicate.
const FailPointAfterCommit = "consumer.after-commit"

// DLQ metadata keys added to a dead-lettered message (docs/design.md, Dead
// letters).
const (
	MetaOriginalTopic     = "originalTopic"
	MetaOriginalPartition = "originalPartition"
	MetaOriginalOffset    = "originalOffset"
	MetaEventID           = "eventId"
	MetaFailureReason     = "failureReason"
	MetaErrorClass        = "errorClass"
	MetaAttempts          = "attempts"
	MetaFirstFailedAt     = "firstFailedAt"
	MetaConsumer          = "consumer"
)

// RetryConfig bounds retries of retryable failures.
type RetryConfig struct {
	MaxAttempts     int
	InitialInterval time.Duration
	MaxInterval     time.Duration
}

// DefaultRetryConfig is the tutorial's: 5 attempts, 1 s initial, 30 s max,
// exponential.
func DefaultRetryConfig() RetryConfig {
	return RetryConfig{MaxAttempts: 5, InitialInterval: time.Second, MaxInterval: 30 * time.Second}
}

// Validate reports an unusable retry configuration.
func (c RetryConfig) Validate() error {
	if c.MaxAttempts < 1 {
		return errors.New("retry max attempts must be at least 1")
	}
	if c.InitialInterval <= 0 || c.MaxInterval < c.InitialInterval {
		return errors.New("retry intervals need 0 < initial <= max")
	}
	return nil
}

// Config configures one consumer's router.
type Config struct {
	// Consumer names the handler, its dedup rows and its DLQ records.
	Consumer string
	Topic    string
	DLQTopic string
	Retry    RetryConfig
	// FailPoints arms FailPointAfterCommit for crash tests; nil is inert.
	FailPoints *failpoint.Registry
	// Tracing records a span of each message (traceMessages); nil: none.
	Tracing trace.TracerProvider
}

// Validate reports a missing or unusable setting.
func (c Config) Validate() error {
	var errs []error
	if c.Consumer == "" || c.Topic == "" || c.DLQTopic == "" {
		errs = append(errs, errors.New("consumer, topic and DLQ topic are required"))
	}
	return errors.Join(append(errs, c.Retry.Validate())...)
}

// EventHandler handles one valid event. It returns nil only after its
// effects are committed, and says what it did with the event (APPLIED,
// DUPLICATE, WAITING_FOR_GAP, ...: an inbox outcome), so the metrics show
// redeliveries and parked events, which change nothing and are otherwise
// invisible. An empty outcome is not counted.
type EventHandler func(ctx context.Context, env event.Envelope) (versionguard.Outcome, error)

// DeadLetterRecorder keeps the audit record of a dead-lettered message.
type DeadLetterRecorder interface {
	Add(ctx context.Context, r dlq.Record) (int64, error)
}

// NewRouter returns a Watermill router that feeds cfg.Topic to handle with
// the suite's middleware order. Run it with Run(ctx); it stops with ctx.
func NewRouter(
	cfg Config,
	subscriber message.Subscriber,
	dlqPublisher message.Publisher,
	recorder DeadLetterRecorder,
	metrics *Metrics,
	logger *slog.Logger,
	handle EventHandler,
) (*message.Router, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wlogger := messaging.WatermillLogger(logger)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, wlogger)
	if err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	bound := metrics.of(cfg.Consumer)
	dead := deadLetterer{cfg: cfg, publisher: dlqPublisher, recorder: recorder, metrics: metrics, bound: bound, logger: logger}
	h := router.AddConsumerHandler(cfg.Consumer, cfg.Topic, subscriber, eventHandler(cfg, bound, logger, handle))
	// Handler middlewares run in the order added, the first outermost. The
	// span of a message is outermost so it covers every attempt. The dead
	// letterer runs the retries itself (runRetrying), so a message passes
	// two middlewares besides tracing, and its attempts are counted
	// without a context value.
	if cfg.Tracing != nil {
		h.AddMiddleware(traceMessages(cfg.Tracing, cfg.Topic))
	}
	h.AddMiddleware(dead.middleware, middleware.Recoverer)
	return router, nil
}

// eventHandler parses and validates the message, then calls handle. The
// after-commit fail point fires once handle's work is committed, before the
// router acknowledges the message.
func eventHandler(cfg Config, metrics *boundMetrics, logger *slog.Logger, handle EventHandler) message.NoPublishHandlerFunc {
	return func(msg *message.Message) error {
		start := time.Now()
		env, err := event.Parse(msg.Payload)
		if err != nil {
			metrics.handled(outcomeInvalid, time.Since(start))
			return err
		}
		ctx := observability.WithEvent(msg.Context(), env.TraceID, env.EventID)
		outcome, err := handle(ctx, env)
		if err != nil {
			class, _ := Classify(err)
			if class != BusinessRejection {
				metrics.handled(outcomeError, time.Since(start))
				return err
			}
			logger.InfoContext(ctx, "business rejection recorded", "error", err, "eventType", env.EventType)
			metrics.handled(outcomeRejected, time.Since(start))
		} else {
			metrics.handled(outcomeOK, time.Since(start))
			metrics.converged(time.Since(env.OccurredAt))
		}
		metrics.outcome(outcome)
		return cfg.FailPoints.Inject(FailPointAfterCommit)
	}
}

// attemptLog follows one message through its retries.
type attemptLog struct {
	attempts      int
	firstFailedAt time.Time
}

type deadLetterer struct {
	cfg       Config
	publisher message.Publisher
	recorder  DeadLetterRecorder
	metrics   *Metrics
	bound     *boundMetrics
	logger    *slog.Logger
}

// middleware runs the message's handler with retries (runRetrying) and
// dead-letters a message whose handling failed for good: it is
// recorded and published to the DLQ topic, and only then acknowledged. If
// either step fails the error stands, the message is not acknowledged and it
// is delivered again: nothing is lost.
func (d deadLetterer) middleware(h message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		log := &attemptLog{}
		out, err := runRetrying(d.cfg.Retry, h, msg, log, d.bound.retried)
		if err == nil {
			return out, nil
		}
		if msg.Context().Err() != nil {
			// Shutting down mid-retry is not a verdict on the message: it
			// stays unacknowledged and is delivered again after the restart.
			return nil, err
		}
		if dlqErr := d.deadLetter(msg, err, log); dlqErr != nil {
			return nil, errors.Join(err, dlqErr)
		}
		return nil, nil
	}
}

func (d deadLetterer) deadLetter(msg *message.Message, cause error, log *attemptLog) error {
	ctx := msg.Context()
	class, reason := Classify(cause)
	if log.firstFailedAt.IsZero() {
		log.firstFailedAt = time.Now().UTC()
	}
	headers := make(map[string]string, len(msg.Metadata))
	for k, v := range msg.Metadata {
		headers[k] = v
	}
	rec := d.record(class, reason, cause)
	rec.EventID = msg.Metadata.Get(event.HeaderEventID)
	rec.AggregateID = msg.Metadata.Get(event.HeaderAggregateID)
	rec.EventType = msg.Metadata.Get(event.HeaderEventType)
	rec.Value = msg.Payload
	rec.Headers = headers
	rec.Attempts = max(log.attempts, 1)
	rec.FirstFailedAt = log.firstFailedAt
	if p, ok := messaging.PartitionFromContext(ctx); ok {
		rec.OriginalPartition = p
	}
	if o, ok := messaging.OffsetFromContext(ctx); ok {
		rec.OriginalOffset = o
	}
	if key, ok := messaging.KeyFromContext(ctx); ok {
		rec.Key = key
		if rec.AggregateID == "" {
			rec.AggregateID = string(key)
		}
	}
	// Headers may be missing on a message another client published; the
	// envelope, if it parses at all, still names the event.
	if rec.EventID == "" || rec.AggregateID == "" {
		if env, err := event.Parse(msg.Payload); err == nil {
			rec.EventID, rec.AggregateID, rec.EventType = env.EventID, env.AggregateID, string(env.EventType)
		}
	}
	if _, err := d.recorder.Add(context.WithoutCancel(ctx), rec); err != nil {
		return err
	}
	if err := d.publish(rec); err != nil {
		return err
	}
	d.done(ctx, rec)
	return nil
}

// record starts the dead letter of a failure of class for this consumer;
// the caller adds what it knows of the message. Its position in the
// original topic is unknown (-1) until set.
func (d deadLetterer) record(class Class, reason string, cause error) dlq.Record {
	return dlq.Record{
		Consumer:          d.cfg.Consumer,
		OriginalTopic:     d.cfg.Topic,
		OriginalPartition: -1,
		OriginalOffset:    -1,
		FailureReason:     reason + ": " + unlabelled(cause),
		ErrorClass:        string(class),
	}
}

// publish sends rec to the DLQ topic: its original key, value and headers
// plus the metadata of docs/design.md, Dead letters.
func (d deadLetterer) publish(rec dlq.Record) error {
	dm := message.NewMessage(watermill.NewUUID(), rec.Value)
	for k, v := range rec.Headers {
		dm.Metadata.Set(k, v)
	}
	dm.Metadata.Set(event.HeaderAggregateID, rec.AggregateID)
	dm.Metadata.Set(MetaOriginalTopic, rec.OriginalTopic)
	dm.Metadata.Set(MetaOriginalPartition, strconv.Itoa(int(rec.OriginalPartition)))
	dm.Metadata.Set(MetaOriginalOffset, strconv.FormatInt(rec.OriginalOffset, 10))
	dm.Metadata.Set(MetaEventID, rec.EventID)
	dm.Metadata.Set(MetaFailureReason, rec.FailureReason)
	dm.Metadata.Set(MetaErrorClass, rec.ErrorClass)
	dm.Metadata.Set(MetaAttempts, strconv.Itoa(rec.Attempts))
	dm.Metadata.Set(MetaFirstFailedAt, rec.FirstFailedAt.Format(time.RFC3339Nano))
	dm.Metadata.Set(MetaConsumer, rec.Consumer)
	if err := d.publisher.Publish(d.cfg.DLQTopic, dm); err != nil {
		return fmt.Errorf("publish to %s: %w", d.cfg.DLQTopic, err)
	}
	return nil
}

// done counts and logs a dead letter once it is recorded and published.
func (d deadLetterer) done(ctx context.Context, rec dlq.Record) {
	d.metrics.deadLettered(d.cfg.Consumer, rec.ErrorClass)
	d.logger.WarnContext(observability.WithEvent(ctx, "", rec.EventID), "message dead-lettered",
		"errorClass", rec.ErrorClass, "reason", rec.FailureReason, "attempts", rec.Attempts, "aggregateId", rec.AggregateID)
}
