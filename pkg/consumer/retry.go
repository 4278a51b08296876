package consumer

import (
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/reliable-orders/fulfillment/pkg/backoff"
)

// retry runs a message's handler up to cfg.MaxAttempts times while it fails
// with a Retryable error, waiting between attempts with exponential backoff
// (doubling from InitialInterval, capped at MaxInterval, ±50 % jitter).
// Any other error, or the last attempt's, is returned to the dead letterer.
//
// Written here rather than using Watermill's middleware.Retry: with a
// ShouldRetry hook set, Watermill 1.5.2 advances its backoff twice per
// retry (once to fill RetryParams.Delay, once to wait), so waits grew about
// four-fold per attempt and a poison message held its partition for more
// than three times the configured bound.
func retry(cfg RetryConfig) message.HandlerMiddleware {
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			return runRetrying(cfg, h, msg, &attemptLog{}, nil)
		}
	}
}

// runRetrying is retry's loop for one message. It counts the handler's
// runs in log (for the dead letterer's metadata) and every run after the
// first with retried, which may be nil. The dead letterer calls it
// directly, so a message's attempts need no context value: one allocation
// and one context lookup fewer per message than a middleware of their own.
func runRetrying(cfg RetryConfig, h message.HandlerFunc, msg *message.Message, log *attemptLog, retried func()) ([]*message.Message, error) {
	ctx := msg.Context()
	for attempt := 1; ; attempt++ {
		if attempt > 1 && retried != nil {
			retried()
		}
		out, err := h(msg)
		log.attempts++
		if err == nil {
			return out, nil
		}
		if log.firstFailedAt.IsZero() {
			log.firstFailedAt = time.Now().UTC()
		}
		if class, _ := Classify(err); class != Retryable || attempt >= cfg.MaxAttempts {
			return nil, err
		}
		wait := time.NewTimer(backoff.Jittered(attempt, cfg.InitialInterval, cfg.MaxInterval))
		select {
		case <-ctx.Done():
			wait.Stop()
			return nil, err
		case <-wait.C:
		}
	}
}
