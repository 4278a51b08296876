// Package consumer runs the consumer side of the order-events topic the same
// way in every service: one Watermill router per consumer group with one
// middleware order (the dead letterer outermost, running the retries, then
// recovery, then the handler with its metrics), one error classification (retryable, permanent,
// business rejection), the sweeper that dead-letters events parked past
// their deadline, reconnection after broker outages, and the settings every
// consumer shares.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// ReconnectWarning is the message Run logs, at warning level, each
// time it could not keep the consumer connected and will try again; the
// services' READMEs and tests name it.
const ReconnectWarning = "consumer not connected to the broker; retrying"

// ReconnectConfig bounds how fast Run tries the broker again.
type ReconnectConfig struct {
	// Initial is the first delay; it doubles after each failure.
	Initial time.Duration
	// Max caps the delay.
	Max time.Duration
}

// DefaultReconnect waits 500 ms after the first failure, doubling up to
// 30 s: quick after a blip, quiet during a long outage.
func DefaultReconnect() ReconnectConfig {
	return ReconnectConfig{Initial: 500 * time.Millisecond, Max: 30 * time.Second}
}

// Validate reports unusable bounds.
func (c ReconnectConfig) Validate() error {
	if c.Initial <= 0 || c.Max < c.Initial {
		return errors.New("reconnect delays need 0 < initial <= max")
	}
	return nil
}

// Runtime is what Run needs to keep one consumer running.
type Runtime struct {
	Brokers []string
	// Group is the Kafka consumer group.
	Group string
	// Window is the subscriber's in-flight window per partition; 0 means
	// messaging.DefaultWindow.
	Window int
	Config Config
	// DLQ publishes dead letters. Pass a LazyPublisher: it outlives broker
	// outages, so the service can share it with its replay endpoint.
	DLQ      message.Publisher
	Recorder DeadLetterRecorder
	Metrics  *Metrics
	Logger   *slog.Logger
	Handle   EventHandler
	// Handles, when set, tells the event types Handle has any use for.
	// A message whose eventType header names another of the order events
	// (event.Type.Known) is skipped by the subscriber, before the router
	// (no decoding, span or retry wrapper), and counted as NOT_HANDLED; a
	// message without that header, or naming a type that is not an order
	// event, goes to Handle, which decides from the payload (and a bad
	// event is dead-lettered with its reason).
	Handles func(event.Type) bool
	// Reconnect is the backoff between attempts; the zero value means
	// DefaultReconnect.
	Reconnect ReconnectConfig
	// Parked, when set, is the version guard whose events Run
	// dead-letters once they were parked longer than Parking.Deadline (a
	// GapSweeper next to the router, in DB's transactions). The zero
	// Parking means DefaultParkingConfig.
	Parked  ParkedEvents
	DB      *sqlx.DB
	Parking ParkingConfig
}

// errBuildRouter marks a router that cannot be built: a configuration
// problem that no reconnect cures.
var errBuildRouter = errors.New("build router")

// Run keeps rt's consumer running until ctx ends, and returns nil
// then. A service starts, and serves HTTP, while the broker is down: when
// the broker cannot be reached or the router stops, Run logs one
// ReconnectWarning and tries again after a capped exponential backoff,
// which starts over once a router has run. With rt.Parked set it also runs
// the consumer's GapSweeper. An unusable configuration is returned at once.
func Run(ctx context.Context, rt Runtime) error {
	if rt.Reconnect == (ReconnectConfig{}) {
		rt.Reconnect = DefaultReconnect()
	}
	if rt.Parking == (ParkingConfig{}) {
		rt.Parking = DefaultParkingConfig()
	}
	if err := rt.validate(); err != nil {
		return fmt.Errorf("consumer %s: %w", rt.Config.Consumer, err)
	}
	if rt.Parked == nil {
		return rt.consume(ctx)
	}
	sweeper, err := NewGapSweeper(rt.Config, rt.Parking, rt.DB, rt.Parked, rt.DLQ, rt.Metrics, rt.Logger)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", rt.Config.Consumer, err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return sweeper.Run(ctx) })
	g.Go(func() error { return rt.consume(ctx) })
	return g.Wait()
}

// consume is Run's reconnect loop.
func (rt Runtime) consume(ctx context.Context) error {
	delay := rt.Reconnect.Initial
	for {
		ran, err := rt.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, errBuildRouter) {
			return fmt.Errorf("consumer %s: %w", rt.Config.Consumer, err)
		}
		if ran {
			delay = rt.Reconnect.Initial
		}
		rt.Logger.WarnContext(ctx, ReconnectWarning, "consumer", rt.Config.Consumer, "error", err, "retryIn", delay.String())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		delay = min(2*delay, rt.Reconnect.Max)
	}
}

func (rt Runtime) validate() error {
	var errs []error
	if len(rt.Brokers) == 0 || rt.Group == "" {
		errs = append(errs, errors.New("brokers and consumer group are required"))
	}
	if rt.DLQ == nil || rt.Recorder == nil || rt.Logger == nil || rt.Handle == nil {
		errs = append(errs, errors.New("DLQ publisher, recorder, logger and handler are required"))
	}
	return errors.Join(append(errs, rt.Config.Validate(), rt.Reconnect.Validate())...)
}

// runOnce connects to the broker and runs the router until ctx ends or the
// router stops. It reports whether the router got to run.
func (rt Runtime) runOnce(ctx context.Context) (bool, error) {
	// Watermill leaks a goroutine for every subscription that fails (the
	// router's watcher of a handler that never started waits forever), so
	// the router only subscribes once a broker has answered.
	if err := messaging.Probe(rt.Brokers); err != nil {
		return false, err
	}
	subCfg := messaging.DefaultSubscriberConfig(rt.Brokers, rt.Group)
	if rt.Window > 0 {
		subCfg = subCfg.WithWindow(rt.Window)
	}
	subCfg.Skip = rt.skip()
	sub, err := messaging.NewSubscriber(subCfg, messaging.WatermillLogger(rt.Logger))
	if err != nil {
		return false, fmt.Errorf("create subscriber: %w", err)
	}
	defer sub.Close()
	router, err := NewRouter(rt.Config, sub, rt.DLQ, rt.Recorder, rt.Metrics, rt.Logger, rt.Handle)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errBuildRouter, err)
	}
	err = router.Run(ctx)
	ran := isClosed(router.Running())
	if err != nil {
		return ran, fmt.Errorf("run router: %w", err)
	}
	if ctx.Err() == nil {
		return ran, errors.New("router stopped")
	}
	return ran, nil
}

// skip is the subscriber's Skip for rt.Handles: a message of an event
// type the consumer does not handle is never delivered, and counted as
// consumed and NOT_HANDLED, as the inbox would have answered it.
func (rt Runtime) skip() func(messaging.RecordHeaders) bool {
	if rt.Handles == nil {
		return nil
	}
	bound := rt.Metrics.of(rt.Config.Consumer)
	return func(h messaging.RecordHeaders) bool {
		t := event.Type(h.Get(event.HeaderEventType))
		if !t.Known() || rt.Handles(t) {
			return false
		}
		bound.skipped()
		return true
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
