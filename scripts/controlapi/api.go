package controlapi

import (
	"context"
	"net/http"
	"net/url"
)

// The requests and answers of the control API, written by the runner
// (scripts/devrun) and read by its clients.

// ServiceView is the control API's answer about one service.
type ServiceView struct {
	Name string `json:"name"`
	// State is "running", "restarting", "exited" or "stopped" (by
	// POST /services/{name}/stop); "starting" is an extra instance not
	// ready yet.
	State string `json:"state"`
	// Run counts the starts of the service: 1 for the runner's own.
	Run int `json:"run"`
	// Env is the environment added to this run by a restart request.
	Env map[string]string `json:"env,omitempty"`
	// ExitCode is the exit status once the process has ended (-1: killed
	// by a signal).
	ExitCode *int `json:"exitCode,omitempty"`
	// FailPoint says the exit was an armed fail point's (status 137).
	FailPoint bool `json:"failPoint,omitempty"`
	// Exit describes the end of the process.
	Exit string `json:"exit,omitempty"`
	// Service, Instance, URL and PID say which process this is: instance
	// 1 is the service's own, 2 … the extra ones of a scale request
	// (named "inventory#2", …).
	Service  string `json:"service,omitempty"`
	Instance int    `json:"instance,omitempty"`
	URL      string `json:"url,omitempty"`
	PID      int    `json:"pid,omitempty"`
}

// RestartRequest is the body of POST /services/{name}/restart.
type RestartRequest struct {
	// Env is added to the service's usual environment for this run only,
	// e.g. {"FAILPOINTS": "relay.before-publish=exit"}; only the names the runner allows
	// (devrun.RestartVarsAllowed).
	Env map[string]string `json:"env"`
}

// ScaleRequest is the body of POST /services/{name}/scale.
type ScaleRequest struct {
	// Instances is how many processes of the service should run, the
	// service's own included: 1 stops every extra instance.
	Instances int `json:"instances"`
}

// ScaleView answers a scale request: every instance of the service.
type ScaleView struct {
	Service   string        `json:"service"`
	Instances []ServiceView `json:"instances"`
}

// ServicesView answers GET /services: every process the runner knows, by
// name.
type ServicesView struct {
	Services []ServiceView `json:"services"`
}

// Services reads the state of every service and extra instance.
func (c *Client) Services(ctx context.Context) ([]ServiceView, error) {
	var out ServicesView
	err := c.Do(ctx, http.MethodGet, "/services", nil, &out)
	return out.Services, err
}

// Restart starts service again (or for the first time since a stop) with
// env added to its environment for this run; it answers once the service
// is ready.
func (c *Client) Restart(ctx context.Context, service string, env map[string]string) (ServiceView, error) {
	var out ServiceView
	err := c.Do(ctx, http.MethodPost, "/services/"+url.PathEscape(service)+"/restart", RestartRequest{Env: env}, &out)
	return out, err
}

// Stop stops service gracefully; it stays down until Restart.
func (c *Client) Stop(ctx context.Context, service string) (ServiceView, error) {
	var out ServiceView
	err := c.Do(ctx, http.MethodPost, "/services/"+url.PathEscape(service)+"/stop", nil, &out)
	return out, err
}

// Scale runs instances processes of a consumer service, its own included;
// it answers once the new ones are ready.
func (c *Client) Scale(ctx context.Context, service string, instances int) (ScaleView, error) {
	var out ScaleView
	err := c.Do(ctx, http.MethodPost, "/services/"+url.PathEscape(service)+"/scale", ScaleRequest{Instances: instances}, &out)
	return out, err
}
