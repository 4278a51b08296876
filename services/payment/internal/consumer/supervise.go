package consumer

import (
	"context"
	"log/slog"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// Restart bounds how fast a failed consumer is started again.
type Restart struct {
	Initial time.Duration
	Max     time.Duration
	// Healthy is how long a run must last for the next failure to start
	// the backoff from Initial again.
	Healthy time.Duration
}

// DefaultRestart retries after 1 s, doubling up to 30 s.
func DefaultRestart() Restart {
	return Restart{Initial: time.Second, Max: 30 * time.Second, Healthy: time.Minute}
}

// Supervise calls run until ctx ends, starting it again with capped,
// jittered exponential backoff whenever it returns early (the broker is
// down, the subscription broke). The HTTP API keeps serving meanwhile: the
// consumer is the only part of the service that needs the broker.
func Supervise(ctx context.Context, logger *slog.Logger, restart Restart, run func(context.Context) error) error {
	failures := 0
	for {
		started := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(started) >= restart.Healthy {
			failures = 0
		}
		failures++
		delay := outbox.Backoff(failures, restart.Initial, restart.Max)
		logger.WarnContext(ctx, "consumer stopped; restarting", "error", err, "retryIn", delay.String(), "failures", failures)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
