// Package drills_test runs the drills of scripts/drill — the same cases
// `make drills` runs against `make run` — at small scale against the
// black-box harness, so `make test` proves every failure window the drills
// show a learner.
package drills_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// retryMaxAttempts is small, so the retry-bound drills take a moment; the
// backoff is the harness's short one (RETRY_INITIAL_INTERVAL=50ms,
// RETRY_MAX_INTERVAL=200ms), which the drills need to know to check the
// retry bound.
const (
	retryMaxAttempts = 3
	retryInitial     = 50 * time.Millisecond
	retryMax         = 200 * time.Millisecond
)

// controller is the harness as a drill.Controller. The harness fails the
// test itself when a service does not restart or exit in time.
type controller struct {
	s       *harness.Suite
	timeout time.Duration
}

func (c controller) Restart(_ context.Context, service string, env map[string]string) error {
	c.s.Restart(service, env)
	return nil
}

func (c controller) WaitExit(_ context.Context, service string) (int, error) {
	return c.s.WaitExit(service, c.timeout), nil
}

func TestDrills(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string]string{
		"RETRY_MAX_ATTEMPTS":     strconv.Itoa(retryMaxAttempts),
		"RETRY_INITIAL_INTERVAL": retryInitial.String(),
		"RETRY_MAX_INTERVAL":     retryMax.String(),
	}})
	urls := map[string]string{}
	for _, name := range drill.Services() {
		urls[name] = s.URL(name)
	}
	target := drill.Target{
		URLs:                 urls,
		Brokers:              s.Broker.Addrs(),
		Topic:                s.Topic,
		DLQTopic:             s.DLQTopic,
		AdminToken:           s.AdminToken,
		CallbackSecret:       harness.CallbackSecret,
		RetryMaxAttempts:     retryMaxAttempts,
		RetryInitialInterval: retryInitial,
		RetryMaxInterval:     retryMax,
		Controller:           controller{s: s, timeout: 30 * time.Second},
		RunID:                "t" + drill.NewRunID(),
		Timeout:              30 * time.Second,
	}
	if err := target.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range drill.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			r := c.Run(context.Background(), target)
			if !r.Pass {
				t.Fatalf("%s: %s\n expected: %s\n     seen: %s", r.Verdict(), r.Case, r.Expected, r.Seen)
			}
			t.Logf("PASS in %v: %s", r.Convergence, r.Seen)
		})
	}
}
