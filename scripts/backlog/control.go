package backlog

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

// ControlClient is the Scaler and Lister of a suite started by `make run`:
// it talks to the runner's control API (CONTROL_ADDR, README.md (Drills)).
type ControlClient struct {
	base   string
	client *http.Client
}

// NewControlClient returns a client of the control API at baseURL
// ("http://127.0.0.1:8090").
func NewControlClient(baseURL string) *ControlClient {
	// A scale request answers once the new instances are ready.
	return &ControlClient{base: strings.TrimRight(baseURL, "/"), client: &http.Client{Timeout: 3 * time.Minute}}
}

// controlService is the part of the control API's view of a process the
// client reads.
type controlService struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	State   string `json:"state"`
	URL     string `json:"url"`
	PID     int    `json:"pid"`
}

// Scale asks the runner to run n processes of service and waits until the
// new ones are ready.
func (c *ControlClient) Scale(ctx context.Context, service string, n int) error {
	body, err := json.Marshal(map[string]int{"instances": n})
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, "/services/"+url.PathEscape(service)+"/scale", body, nil)
}

// Instances lists the running processes of service, its own first.
func (c *ControlClient) Instances(ctx context.Context, service string) ([]Instance, error) {
	var list struct {
		Services []controlService `json:"services"`
	}
	if err := c.do(ctx, http.MethodGet, "/services", nil, &list); err != nil {
		return nil, err
	}
	var out []Instance
	for _, s := range list.Services {
		if (s.Service == service || s.Name == service) && s.State == "running" && s.URL != "" {
			out = append(out, Instance{Name: s.Name, URL: s.URL, PID: s.PID})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("control API: no running process of %s (is this runner older than POST /services/{name}/scale?)", service)
	}
	return out, nil
}

func (c *ControlClient) do(ctx context.Context, method, path string, body []byte, v any) error {
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
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return fmt.Errorf("control API %s %s: %d: %s", method, path, resp.StatusCode, e.Error)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("control API %s %s: %w", method, path, err)
		}
	}
	return nil
}
