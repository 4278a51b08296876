package backlog

import (
	"context"
	"fmt"
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

// Scale asks the runner to run n processes of service and waits until the
// new ones are ready.
func (c *ControlClient) Scale(ctx context.Context, service string, n int) error {
	_, err := c.api.Scale(ctx, service, n)
	return err
}

// Instances lists the running processes of service, its own first.
func (c *ControlClient) Instances(ctx context.Context, service string) ([]Instance, error) {
	list, err := c.api.Services(ctx)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, s := range list {
		if (s.Service == service || s.Name == service) && s.State == "running" && s.URL != "" {
			out = append(out, Instance{Name: s.Name, URL: s.URL, PID: s.PID})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("control API: no running process of %s (is this runner older than POST /services/{name}/scale?)", service)
	}
	return out, nil
}
