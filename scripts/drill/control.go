package drill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
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
	var v controlapi.ServiceView
	if err := c.api.Do(ctx, http.MethodGet, "/services/"+url.PathEscape(service)+"/exit?timeout="+c.timeout.String(), nil, &v); err != nil {
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

// broker sends a request to a broker route of the control API and decodes
// its answer into out. A 409 (the suite's brokers are not the runner's) is
// ErrNoBrokerControl.
func (c *ControlClient) broker(ctx context.Context, method, path string, body, out any) error {
	err := c.api.Do(ctx, method, path, body, out)
	var status *controlapi.StatusError
	if errors.As(err, &status) && status.Status == http.StatusConflict {
		return fmt.Errorf("%w: %w", ErrNoBrokerControl, err)
	}
	return err
}

// brokerView is the part of the control API's broker answer the client
// reads.
type brokerView struct {
	State string `json:"state"`
	Fault *struct {
		Hits int `json:"hits"`
	} `json:"fault"`
}

// StopBroker asks the runner to stop its embedded broker.
func (c *ControlClient) StopBroker(ctx context.Context) error {
	return c.broker(ctx, http.MethodPost, "/broker/stop", nil, nil)
}

// StartBroker asks the runner to start its embedded broker again.
func (c *ControlClient) StartBroker(ctx context.Context) error {
	return c.broker(ctx, http.MethodPost, "/broker/start", nil, nil)
}

// LoseAcks arms the runner's lost-ack fault on the next count Produce
// requests to topic.
func (c *ControlClient) LoseAcks(ctx context.Context, topic string, count int) error {
	return c.broker(ctx, http.MethodPost, "/broker/faults", map[string]any{"type": "lost-ack", "topic": topic, "count": count}, nil)
}

// LostAcks reads how many Produce requests the armed fault has answered.
func (c *ControlClient) LostAcks(ctx context.Context) (int, error) {
	var v brokerView
	if err := c.broker(ctx, http.MethodGet, "/broker", nil, &v); err != nil {
		return 0, err
	}
	if v.Fault == nil {
		return 0, errors.New("control API: no broker fault is armed")
	}
	return v.Fault.Hits, nil
}

// ClearFaults asks the runner to remove the broker fault.
func (c *ControlClient) ClearFaults(ctx context.Context) error {
	return c.broker(ctx, http.MethodDelete, "/broker/faults", nil, nil)
}
