package controlapi

import (
	"context"
	"net/http"
	"net/url"
	"time"
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
	out, err := call[ServicesView](ctx, c, http.MethodGet, "/services", nil)
	return out.Services, err
}

// Restart starts service again (or for the first time since a stop) with
// env added to its environment for this run; it answers once the service
// is ready.
func (c *Client) Restart(ctx context.Context, service string, env map[string]string) (ServiceView, error) {
	return call[ServiceView](ctx, c, http.MethodPost, "/services/"+url.PathEscape(service)+"/restart", RestartRequest{Env: env})
}

// Stop stops service gracefully; it stays down until Restart.
func (c *Client) Stop(ctx context.Context, service string) (ServiceView, error) {
	return call[ServiceView](ctx, c, http.MethodPost, "/services/"+url.PathEscape(service)+"/stop", nil)
}

// Scale runs instances processes of a consumer service, its own included;
// it answers once the new ones are ready.
func (c *Client) Scale(ctx context.Context, service string, instances int) (ScaleView, error) {
	return call[ScaleView](ctx, c, http.MethodPost, "/services/"+url.PathEscape(service)+"/scale", ScaleRequest{Instances: instances})
}

// Exit waits, up to timeout, until service's process has ended (or been
// stopped) and answers its state, exit code included.
func (c *Client) Exit(ctx context.Context, service string, timeout time.Duration) (ServiceView, error) {
	return call[ServiceView](ctx, c, http.MethodGet, "/services/"+url.PathEscape(service)+"/exit?timeout="+timeout.String(), nil)
}

// FaultLostAck is the one fault the control API arms: a Produce request
// whose records the broker appends but whose answer is lost — the
// tutorial's "Broker 确认丢失" (the broker's acknowledgement is lost).
// make run's embedded broker answers REQUEST_TIMED_OUT after the append,
// the fault proxy under compose closes the connection.
const FaultLostAck = "lost-ack"

// BrokerView is the control API's answer about the broker.
type BrokerView struct {
	// Embedded is false when the suite uses KAFKA_BROKERS.
	Embedded bool `json:"embedded"`
	// State is "running" or "stopped".
	State   string `json:"state,omitempty"`
	Addr    string `json:"addr,omitempty"`
	DataDir string `json:"dataDir,omitempty"`
	// Stops counts the stops by the control API.
	Stops int `json:"stops"`
	// Fault is the fault armed last, with how often it has answered.
	Fault *FaultView `json:"fault,omitempty"`
	Error string     `json:"error,omitempty"`
}

// FaultRequest is the body of POST /broker/faults.
type FaultRequest struct {
	// Type is the fault; only "lost-ack" (the default) exists.
	Type string `json:"type"`
	// Count is how many Produce requests it answers (default 1).
	Count int `json:"count"`
	// Topic limits it to one topic (default the order events topic).
	Topic string `json:"topic"`
}

// FaultView is an armed fault and how often it has answered so far.
type FaultView struct {
	FaultRequest
	Error string `json:"error"`
	Hits  int    `json:"hits"`
}

// Broker reads the state of the broker and its armed fault.
func (c *Client) Broker(ctx context.Context) (BrokerView, error) {
	return call[BrokerView](ctx, c, http.MethodGet, "/broker", nil)
}

// StopBroker takes the runner's broker away, keeping its data.
func (c *Client) StopBroker(ctx context.Context) (BrokerView, error) {
	return call[BrokerView](ctx, c, http.MethodPost, "/broker/stop", nil)
}

// StartBroker brings the broker back on its address with its data.
func (c *Client) StartBroker(ctx context.Context) (BrokerView, error) {
	return call[BrokerView](ctx, c, http.MethodPost, "/broker/start", nil)
}

// ArmFault arms req, replacing the fault armed before.
func (c *Client) ArmFault(ctx context.Context, req FaultRequest) (BrokerView, error) {
	return call[BrokerView](ctx, c, http.MethodPost, "/broker/faults", req)
}

// ClearFault removes the armed fault, used up or not.
func (c *Client) ClearFault(ctx context.Context) (BrokerView, error) {
	return call[BrokerView](ctx, c, http.MethodDelete, "/broker/faults", nil)
}
