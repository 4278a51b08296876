package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// ControlClient is the Controller of a suite started by `make run`: it
// talks to the runner's control API (CONTROL_ADDR, README.md (Drills)).
type ControlClient struct {
	base    string
	client  *http.Client
	timeout time.Duration
}

// NewControlClient returns a client of the control API at baseURL
// ("http://127.0.0.1:8090"); timeout bounds a wait for an exit.
func NewControlClient(baseURL string, timeout time.Duration) *ControlClient {
	return &ControlClient{
		base: strings.TrimRight(baseURL, "/"),
		// A restart answers once the service is ready, a wait once it has
		// exited: both can take a while.
		client:  &http.Client{Timeout: timeout + 2*time.Minute},
		timeout: timeout,
	}
}

// controlView is the part of the control API's answer the client reads.
type controlView struct {
	State    string `json:"state"`
	ExitCode *int   `json:"exitCode"`
	Error    string `json:"error"`
}

// Restart asks the runner to restart service with env added to its usual
// environment; the runner answers once the service is ready.
func (c *ControlClient) Restart(ctx context.Context, service string, env map[string]string) error {
	body, err := json.Marshal(map[string]any{"env": env})
	if err != nil {
		return err
	}
	_, err = c.do(ctx, "POST", "/services/"+url.PathEscape(service)+"/restart", body)
	return err
}

// WaitExit asks the runner to wait until service's process has ended and
// returns its exit status.
func (c *ControlClient) WaitExit(ctx context.Context, service string) (int, error) {
	v, err := c.do(ctx, "GET", "/services/"+url.PathEscape(service)+"/exit?timeout="+c.timeout.String(), nil)
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
	_, err := c.do(ctx, "GET", "/services", nil)
	return err
}

func (c *ControlClient) do(ctx context.Context, method, path string, body []byte) (controlView, error) {
	var v controlView
	err := c.send(ctx, method, path, body, &v)
	return v, err
}

// send sends a request to the control API and decodes its answer into out.
// A 409 from a broker route (the suite's brokers are not the runner's) is
// ErrNoBrokerControl.
func (c *ControlClient) send(ctx context.Context, method, path string, body []byte, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	_ = json.Unmarshal(raw, out)
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		err := fmt.Errorf("control API %s %s: %d: %s", method, path, resp.StatusCode, e.Error)
		if resp.StatusCode == http.StatusConflict && strings.HasPrefix(path, "/broker") {
			err = fmt.Errorf("%w: %w", ErrNoBrokerControl, err)
		}
		return err
	}
	return nil
}

// Stop asks the runner to stop service; it stays down until Restart.
func (c *ControlClient) Stop(ctx context.Context, service string) error {
	_, err := c.do(ctx, "POST", "/services/"+url.PathEscape(service)+"/stop", nil)
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
	return c.send(ctx, "POST", "/broker/stop", nil, &brokerView{})
}

// StartBroker asks the runner to start its embedded broker again.
func (c *ControlClient) StartBroker(ctx context.Context) error {
	return c.send(ctx, "POST", "/broker/start", nil, &brokerView{})
}

// LoseAcks arms the runner's lost-ack fault on the next count Produce
// requests to topic.
func (c *ControlClient) LoseAcks(ctx context.Context, topic string, count int) error {
	body, err := json.Marshal(map[string]any{"type": "lost-ack", "topic": topic, "count": count})
	if err != nil {
		return err
	}
	return c.send(ctx, "POST", "/broker/faults", body, &brokerView{})
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
	return c.send(ctx, "DELETE", "/broker/faults", nil, &brokerView{})
}
