package drill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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

// controlView is the part of the control API's answer the client reads.
type controlView struct {
	State    string `json:"state"`
	ExitCode *int   `json:"exitCode"`
}

// Restart asks the runner to restart service with env added to its usual
// environment; the runner answers once the service is ready.
func (c *ControlClient) Restart(ctx context.Context, service string, env map[string]string) error {
	return c.send(ctx, "POST", "/services/"+url.PathEscape(service)+"/restart", map[string]any{"env": env}, nil)
}

// WaitExit asks the runner to wait until service's process has ended and
// returns its exit status.
func (c *ControlClient) WaitExit(ctx context.Context, service string) (int, error) {
	var v controlView
	if err := c.send(ctx, "GET", "/services/"+url.PathEscape(service)+"/exit?timeout="+c.timeout.String(), nil, &v); err != nil {
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
	return c.send(ctx, "GET", "/services", nil, nil)
}

// send sends a request to the control API and decodes its answer into out.
// A 409 from a broker route (the suite's brokers are not the runner's) is
// ErrNoBrokerControl.
func (c *ControlClient) send(ctx context.Context, method, path string, body, out any) error {
	err := c.api.Do(ctx, method, path, body, out)
	var status *controlapi.StatusError
	if errors.As(err, &status) && status.Status == http.StatusConflict && strings.HasPrefix(path, "/broker") {
		return fmt.Errorf("%w: %w", ErrNoBrokerControl, err)
	}
	return err
}

// Stop asks the runner to stop service; it stays down until Restart.
func (c *ControlClient) Stop(ctx context.Context, service string) error {
	return c.send(ctx, "POST", "/services/"+url.PathEscape(service)+"/stop", nil, nil)
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
	return c.send(ctx, "POST", "/broker/stop", nil, nil)
}

// StartBroker asks the runner to start its embedded broker again.
func (c *ControlClient) StartBroker(ctx context.Context) error {
	return c.send(ctx, "POST", "/broker/start", nil, nil)
}

// LoseAcks arms the runner's lost-ack fault on the next count Produce
// requests to topic.
func (c *ControlClient) LoseAcks(ctx context.Context, topic string, count int) error {
	return c.send(ctx, "POST", "/broker/faults", map[string]any{"type": "lost-ack", "topic": topic, "count": count}, nil)
}

// LostAcks reads how many Produce requests the armed fault has answered.
func (c *ControlClient) LostAcks(ctx context.Context) (int, error) {
	var v brokerView
	if err := c.send(ctx, "GET", "/broker", nil, &v); err != nil {
		return 0, err
	}
	if v.Fault == nil {
		return 0, errors.New("control API: no broker fault is armed")
	}
	return v.Fault.Hits, nil
}

// ClearFaults asks the runner to remove the broker fault.
func (c *ControlClient) ClearFaults(ctx context.Context) error {
	return c.send(ctx, "DELETE", "/broker/faults", nil, nil)
}
