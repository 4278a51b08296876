package backlog

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
)

// ControlClient is the Scaler and Lister of a suite started by `make run`:
// it talks to the runner's control API (CONTROL_ADDR, README.md (Drills)).
type ControlClient struct {
	api *controlapi.Client
}

// NewControlClient returns a client of the control API at baseURL
// ("http://127.0.0.1:8090").
func NewControlClient(baseURL string) *ControlClient {
	// A scale request answers once the new instances are ready.
	return &ControlClient{api: controlapi.New(baseURL, 3*time.Minute)}
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
	return c.api.Do(ctx, http.MethodPost, "/services/"+url.PathEscape(service)+"/scale", map[string]int{"instances": n}, nil)
}

// Instances lists the running processes of service, its own first.
func (c *ControlClient) Instances(ctx context.Context, service string) ([]Instance, error) {
	var list struct {
		Services []controlService `json:"services"`
	}
	if err := c.api.Do(ctx, http.MethodGet, "/services", nil, &list); err != nil {
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
