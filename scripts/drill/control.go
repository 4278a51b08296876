package drill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
)

// ControlClient is the Controller of a suite started by `make run`: it
// talks to the runner's control API (CONTROL_ADDR, README.md (Drills)).
type ControlClient struct {
	api     *controlapi.Client
	timeout time.Duration
}

// NewControlClient returns a client of the control API at baseURL
// ("http://127.0.0.1:8090"); timeout bounds a wait for an exit.
func NewControlClient(baseURL string, timeout time.Duration) *ControlClient {
	// A restart answers once the service is ready, a wait once it has
	// exited: both can take a while.
	return &ControlClient{api: controlapi.New(baseURL, timeout+2*time.Minute), timeout: timeout}
}

// Restart asks the runner to restart service with env added to its usual
// environment; the runner answers once the service is ready.
func (c *ControlClient) Restart(ctx context.Context, service string, env map[string]string) error {
	_, err := c.api.Restart(ctx, service, env)
	return err
}

// WaitExit asks the runner to wait until service's process has ended and
// returns its exit status.
func (c *ControlClient) WaitExit(ctx context.Context, service string) (int, error) {
	v, err := c.api.Exit(ctx, service, c.timeout)
	if err != nil {
		return 0, err
	}
	if v.ExitCode == nil {
		return 0, fmt.Errorf("%s: the control API reports state %q and no exit code", service, v.State)
	}
	return *v.ExitCode, nil
}

// Check verifies the control API answers, so a run can say early that crash
// drills will be skipped.
func (c *ControlClient) Check(ctx context.Context) error {
	_, err := c.api.Services(ctx)
	return err
}

// Stop asks the runner to stop service; it stays down until Restart.
func (c *ControlClient) Stop(ctx context.Context, service string) error {
	_, err := c.api.Stop(ctx, service)
	return err
}

// brokerErr is err of a broker route: a 409 (the suite's brokers are not
// the runner's) is ErrNoBrokerControl.
func brokerErr(_ controlapi.BrokerView, err error) error {
	var status *controlapi.StatusError
	if errors.As(err, &status) && status.Status == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrNoBrokerControl, err)
	}
	return err
}

// StopBroker asks the runner to stop its embedded broker.
func (c *ControlClient) StopBroker(ctx context.Context) error {
	return brokerErr(c.api.StopBroker(ctx))
}

// StartBroker asks the runner to start its embedded broker again.
func (c *ControlClient) StartBroker(ctx context.Context) error {
	return brokerErr(c.api.StartBroker(ctx))
}

// LoseAcks arms the runner's lost-ack fault on the next count Produce
// requests to topic.
func (c *ControlClient) LoseAcks(ctx context.Context, topic string, count int) error {
	return brokerErr(c.api.ArmFault(ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Topic: topic, Count: count}))
}

// LostAcks reads how many Produce requests the armed fault has answered.
func (c *ControlClient) LostAcks(ctx context.Context) (int, error) {
	v, err := c.api.Broker(ctx)
	if err != nil {
		return 0, brokerErr(v, err)
	}
	if v.Fault == nil {
		return 0, errors.New("control API: no broker fault is armed")
	}
	return v.Fault.Hits, nil
}

// ClearFaults asks the runner to remove the broker fault.
func (c *ControlClient) ClearFaults(ctx context.Context) error {
	return brokerErr(c.api.ClearFault(ctx))
}
