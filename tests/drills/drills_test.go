// Package drills_test runs the drills of scripts/drill — the same cases
// `make drills` runs against `make run` — at small scale against the
// black-box harness, so `make test` proves every failure window the drills
// show a learner.
package drills_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
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

// outage is how long the outage drills keep the broker or the order
// service away: a few of the harness's short outbox backoffs
// (OUTBOX_BACKOFF_INITIAL=100ms, OUTBOX_BACKOFF_MAX=500ms), not the
// tutorial's 30 s.
const outage = 5 * time.Second

// parkDeadline is short, so reorder/gap-deadline runs here (it skips a
// deadline over a minute); long enough that reorder/refund-before-payment's
// parked REFUNDED still meets its PAID. The sweep checks often.
const (
	parkDeadline      = 5 * time.Second
	parkSweepInterval = 250 * time.Millisecond
)

// controller is the harness as a drill.Controller, BrokerController and
// ServiceStopper, answering as the control API's client does. The harness
// fails the test itself when a service does not restart or exit in time,
// or the broker does not start again.
type controller struct {
	s *harness.Suite

	mu    sync.Mutex
	fault *kfake.FaultHandle
	armed controlapi.FaultRequest
}

func (c *controller) Restart(_ context.Context, service string, env map[string]string) (controlapi.ServiceView, error) {
	c.s.Restart(service, env)
	return controlapi.ServiceView{Name: service, State: "running", Env: env}, nil
}

func (c *controller) Exit(_ context.Context, service string, timeout time.Duration) (controlapi.ServiceView, error) {
	code := c.s.WaitExit(service, timeout)
	return controlapi.ServiceView{Name: service, State: "exited", ExitCode: &code}, nil
}

func (c *controller) Stop(_ context.Context, service string) (controlapi.ServiceView, error) {
	c.s.Stop(service)
	return controlapi.ServiceView{Name: service, State: "stopped"}, nil
}

func (c *controller) StopBroker(context.Context) (controlapi.BrokerView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s.Broker != nil {
		c.s.StopBroker()
		c.fault = nil
	}
	return controlapi.BrokerView{Embedded: true, State: "stopped"}, nil
}

func (c *controller) StartBroker(context.Context) (controlapi.BrokerView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s.Broker == nil {
		c.s.StartBroker()
	}
	return c.view(), nil
}

// ArmFault arms kfake's fault as tests/e2e TestBrokerAcknowledgementLost
// does: REQUEST_TIMED_OUT on Produce, answered after the append.
func (c *controller) ArmFault(_ context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s.Broker == nil {
		return controlapi.BrokerView{}, errors.New("the broker is stopped")
	}
	if c.fault != nil {
		c.fault.Remove()
	}
	c.fault = c.s.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: req.Topic, Err: kerr.RequestTimedOut, Count: req.Count})
	c.armed = req
	return c.view(), nil
}

func (c *controller) Broker(context.Context) (controlapi.BrokerView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view(), nil
}

func (c *controller) ClearFault(context.Context) (controlapi.BrokerView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fault != nil {
		c.fault.Remove()
		c.fault = nil
	}
	return c.view(), nil
}

// view is the broker as the control API answers it; c.mu is held.
func (c *controller) view() controlapi.BrokerView {
	v := controlapi.BrokerView{Embedded: true, State: "running"}
	if c.fault != nil {
		v.Fault = &controlapi.FaultView{FaultRequest: c.armed, Hits: c.fault.Hits()}
	}
	return v
}

func TestDrills(t *testing.T) {
	s := harness.Start(t, harness.Options{Env: map[string]string{
		"RETRY_MAX_ATTEMPTS":     strconv.Itoa(retryMaxAttempts),
		"RETRY_INITIAL_INTERVAL": retryInitial.String(),
		"RETRY_MAX_INTERVAL":     retryMax.String(),
		"PARK_DEADLINE":          parkDeadline.String(),
		"PARK_SWEEP_INTERVAL":    parkSweepInterval.String(),
	}})
	urls := map[string]string{}
	for _, name := range drill.Services() {
		urls[name] = s.URL(name)
	}
	databases := map[string]string{}
	for name := range harness.Consumers {
		databases[name] = s.DatabaseURL(name)
	}
	databases[drill.Order] = s.DatabaseURL(drill.Order)
	databases[drill.Reconciliation] = s.DatabaseURL(drill.Reconciliation)
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
		ParkDeadline:         parkDeadline,
		Controller:           &controller{s: s},
		Outage:               outage,
		RunID:                "t" + drill.NewRunID(),
		Timeout:              30 * time.Second,
		Databases:            databases,
	}
	if err := target.Validate(); err != nil {
		t.Fatal(err)
	}
	ran, failed := 0, false
	for _, c := range drill.Cases() {
		ok := t.Run(c.Name, func(t *testing.T) {
			ran++
			r := c.Run(context.Background(), target)
			if !r.Pass {
				t.Fatalf("%s: %s\n expected: %s\n     seen: %s", r.Verdict(), r.Case, r.Expected, r.Seen)
			}
			t.Logf("PASS in %v: %s", r.Convergence, r.Seen)
		})
		failed = failed || !ok
	}
	// A failed case may have left its orders half-way: the run would
	// only repeat its failure.
	if ran > 0 && !failed {
		nothingOpen(t, s, target.RunID)
	}
}

// nothingOpen runs reconciliation over every order, whatever its age,
// after the cases that ran: each removed the synthetic orders it planted
// and left its real ones converged, so the run finds nothing but the
// deliberate leftovers.
func nothingOpen(t *testing.T, s *harness.Suite, runID string) {
	t.Helper()
	// The findings a drill leaves for a person on purpose, as order, kind
	// and service (docs/drills.md, What drills leave for a person): what
	// a restore from a backup loses.
	restored := "O-" + runID + "-reconcile-restore-from-backup"
	deliberate := map[string]bool{
		restored + "-orphan ORPHAN_EFFECT payment":      true,
		restored + "-orphan ORPHAN_EFFECT inventory":    true,
		restored + "-orphan ORPHAN_EFFECT points":       true,
		restored + "-orphan ORPHAN_EFFECT notification": true,
		restored + "-fenced AMOUNT_MISMATCH payment":    true,
		restored + "-fenced EXTRA_EFFECT notification":  true,
	}
	run := s.Reconcile()
	open := 0
	for _, f := range run.Findings {
		if !deliberate[f.OrderID+" "+f.Kind+" "+f.Service] {
			open++
			t.Errorf("left open: %s %s %s: expected %s, found %s; %s", f.OrderID, f.Kind, f.Service, f.Expected, f.Actual, f.Action)
		}
	}
	t.Logf("reconciliation run %d over all %d orders: %d findings, %d open beyond the deliberate ones", run.ID, run.Checked, len(run.Findings), open)
}
