package drill

import (
	"bytes"
	"context"
	"encoding/json"
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
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return controlView{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return controlView{}, fmt.Errorf("control API: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return controlView{}, fmt.Errorf("control API: %w", err)
	}
	var v controlView
	_ = json.Unmarshal(raw, &v)
	if resp.StatusCode != http.StatusOK {
		if v.Error == "" {
			v.Error = strings.TrimSpace(string(raw))
		}
		return v, fmt.Errorf("control API %s %s: %d: %s", method, path, resp.StatusCode, v.Error)
	}
	return v, nil
}
