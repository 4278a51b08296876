package devrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
)

// FailPointExitCode is the status pkg/failpoint's "exit" action ends a
// process with (as SIGKILL would be reported by a shell). The runner treats
// it as a drill's planned crash, not as a failure of the suite.
const FailPointExitCode = 137

// Errors of the control API, each answered with its own HTTP status.
var (
	// ErrUnknownService is a name that is not one of the runner's services.
	ErrUnknownService = errors.New("no such service")
	// ErrRestartInProgress refuses a second restart of a service while the
	// first one waits for readiness.
	ErrRestartInProgress = errors.New("a restart of this service is in progress")
	// ErrStillRunning ends a wait for an exit that did not come in time.
	ErrStillRunning = errors.New("still running")
)

// NotReadyError is a restarted service that exited or did not become ready.
type NotReadyError struct {
	Service string
	Reason  string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("%s did not become ready after the restart: %s", e.Service, e.Reason)
}

// restarter is what the control API needs of the supervisor.
type restarter interface {
	RestartWith(name string, env []string) (int, error)
}

// serviceState is what the control API knows about one service's current
// process.
type serviceState struct {
	readyURL   string
	run        int
	env        map[string]string // the extra environment of this run
	restarting bool
	stopped    bool            // stopped by the control API (stop.go)
	exit       *supervise.Exit // set once this run has exited
	done       chan struct{}   // closed once this run has exited
}

// ServiceView is the control API's answer about one service
// (controlapi.ServiceView, the type its clients decode).
type ServiceView = controlapi.ServiceView

// control is the runner's view of its services for the control API: it
// restarts them with extra environment, reports their exits and decides
// which exits the suite survives.
type control struct {
	sup          restarter
	client       *http.Client
	readyTimeout time.Duration
	log          *prefixed
	controlURL   string
	// broker is the embedded broker; nil when KAFKA_BROKERS is external.
	broker *brokerControl

	mu       sync.Mutex
	services map[string]*serviceState
	// scale runs the extra instances of the consumers (scale.go); nil
	// until the runner has started the services.
	scale *scaler
}

func newControl(sup restarter, broker *brokerControl, cfg Config, log *prefixed) *control {
	c := &control{
		sup:          sup,
		broker:       broker,
		client:       &http.Client{Timeout: 2 * time.Second},
		readyTimeout: cfg.ReadyTimeout,
		log:          log,
		controlURL:   "http://" + cfg.ControlAddr,
		services:     map[string]*serviceState{},
	}
	for _, s := range cfg.Services {
		// The runner's own start is a fresh supervisor's first run.
		c.services[s.Name] = &serviceState{readyURL: s.LocalURL() + "/readyz", run: 1, done: make(chan struct{})}
	}
	return c
}

// expected records e and reports whether the suite carries on without the
// service: an exit of a process already replaced, an exit during a restart
// request (whose caller is told), and a fail point's exit (status 137),
// after which the service stays down until it is restarted. Any other exit
// is a crash, and the runner stops everything as before.
func (c *control) expected(e supervise.Exit) bool {
	if c.scale != nil && c.scale.owns(e.Name) {
		return c.scale.expected(e)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.services[e.Name]
	if !ok {
		return false
	}
	if e.Run < st.run || st.stopped {
		return true // replaced, or stopped on request (stop.go)
	}
	st.exit = &e
	close(st.done)
	switch {
	case e.Code() == FailPointExitCode:
		c.log.Printf("%s exited with status %d: an armed fail point; it stays down until POST %s/services/%s/restart",
			e.Name, FailPointExitCode, c.controlURL, e.Name)
		return true
	case st.restarting:
		return true
	}
	return false
}

// restart restarts name with env added to its usual environment and waits
// until it answers /readyz. The lock is held while the supervisor swaps the
// process, so an exit report is never matched with the wrong run.
func (c *control) restart(ctx context.Context, name string, env map[string]string) (ServiceView, error) {
	c.mu.Lock()
	st, ok := c.services[name]
	if !ok {
		c.mu.Unlock()
		return ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	}
	if st.restarting {
		c.mu.Unlock()
		return ServiceView{}, fmt.Errorf("%s: %w", name, ErrRestartInProgress)
	}
	run, err := c.sup.RestartWith(name, envList(env))
	if err != nil {
		c.mu.Unlock()
		return ServiceView{}, err
	}
	st.run, st.env, st.exit, st.done, st.restarting, st.stopped = run, env, nil, make(chan struct{}), true, false
	done, url := st.done, st.readyURL
	c.mu.Unlock()
	c.log.Printf("%s restarted (run %d) by the control API%s", name, run, describeEnv(env))

	err = c.waitReady(ctx, name, url, done)

	c.mu.Lock()
	defer c.mu.Unlock()
	st.restarting = false
	return st.view(name), err
}

func (c *control) waitReady(ctx context.Context, name, url string, done <-chan struct{}) error {
	return awaitReady(ctx, c.client, c.readyTimeout, name, url, done, func() string {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.services[name].exit.String()
	})
}

// waitExit waits until the current process of name has ended.
func (c *control) waitExit(ctx context.Context, name string, timeout time.Duration) (ServiceView, error) {
	c.mu.Lock()
	st, ok := c.services[name]
	if !ok {
		c.mu.Unlock()
		return ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	}
	done := st.done
	c.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		return c.view(name)
	case <-ctx.Done():
		return ServiceView{}, ctx.Err()
	}
	return c.view(name)
}

func (c *control) view(name string) (ServiceView, error) {
	if c.scale != nil && c.scale.owns(name) {
		if v, ok := c.scale.view(name); ok {
			return v, nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.services[name]
	if !ok {
		return ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	}
	return c.describe(st.view(name)), nil
}

// views are every process of the suite: the services' own and the extra
// instances of a scale request, by name.
func (c *control) views() []ServiceView {
	c.mu.Lock()
	out := make([]ServiceView, 0, len(c.services))
	for name, st := range c.services {
		out = append(out, c.describe(st.view(name)))
	}
	c.mu.Unlock()
	if c.scale != nil {
		out = append(out, c.scale.views()...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *control) describe(v ServiceView) ServiceView {
	if c.scale != nil {
		c.scale.describe(&v)
	}
	return v
}

func (st *serviceState) view(name string) ServiceView {
	v := ServiceView{Name: name, State: "running", Run: st.run, Env: st.env}
	switch {
	case st.exit != nil:
		code := st.exit.Code()
		v.State, v.ExitCode, v.FailPoint, v.Exit = "exited", &code, code == FailPointExitCode, st.exit.String()
	case st.stopped:
		v.State = "stopped"
	case st.restarting:
		v.State = "restarting"
	}
	return v
}

// envName is what the control API accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// RestartRequest is the body of POST /services/{name}/restart
// (controlapi.RestartRequest).
type RestartRequest = controlapi.RestartRequest

// handler serves the control API to this machine's programs only (guard):
//
//	GET  /services                        every service's state
//	GET  /services/{name}                 one service's state
//	POST /services/{name}/restart         {"env":{...}}: restart, wait until ready
//	GET  /services/{name}/exit?timeout=30s  wait until the current process ends
//	POST /services/{name}/stop            stop it; it stays down until a restart (stop.go)
//	POST /services/{name}/scale           {"instances":N}: run N processes of a consumer (scale.go)
//	GET  /broker, POST /broker/stop|start, POST|DELETE /broker/faults  the embedded broker (brokerctl.go)
func (c *control) handler() http.Handler {
	mux := http.NewServeMux()
	serviceRoutes(mux, c)
	brokerRoutes(mux, c.broker)
	return guard(mux)
}

// services is what the /services routes drive: make run's processes
// (control) or the compose project's containers (ComposeControl).
type services interface {
	list(ctx context.Context) ([]ServiceView, error)
	one(ctx context.Context, name string) (ServiceView, error)
	restart(ctx context.Context, name string, env map[string]string) (ServiceView, error)
	halt(ctx context.Context, name string) (ServiceView, error)
	waitExit(ctx context.Context, name string, timeout time.Duration) (ServiceView, error)
	scaleTo(ctx context.Context, name string, n int) (ScaleView, error)
}

// serviceRoutes adds the /services routes of the control API over s.
func serviceRoutes(mux *http.ServeMux, s services) {
	mux.HandleFunc("GET /services", func(w http.ResponseWriter, r *http.Request) {
		vs, err := s.list(r.Context())
		if err != nil {
			writeError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"services": vs})
	})
	mux.HandleFunc("GET /services/{name}", func(w http.ResponseWriter, r *http.Request) {
		v, err := s.one(r.Context(), r.PathValue("name"))
		answer(w, v, err)
	})
	mux.HandleFunc("POST /services/{name}/restart", func(w http.ResponseWriter, r *http.Request) {
		env, ok := decodeRestart(w, r)
		if !ok {
			return
		}
		v, err := s.restart(r.Context(), r.PathValue("name"), env)
		answer(w, v, err)
	})
	mux.HandleFunc("POST /services/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		v, err := s.halt(r.Context(), r.PathValue("name"))
		answer(w, v, err)
	})
	mux.HandleFunc("GET /services/{name}/exit", func(w http.ResponseWriter, r *http.Request) {
		timeout, ok := exitTimeout(w, r)
		if !ok {
			return
		}
		v, err := s.waitExit(r.Context(), r.PathValue("name"), timeout)
		if err == nil && v.State != "exited" && v.State != "stopped" {
			err = fmt.Errorf("%s: %w after %s", v.Name, ErrStillRunning, timeout)
		}
		answer(w, v, err)
	})
	// POST /services/{name}/scale {"instances": N} answers once the new
	// instances are ready and the surplus ones have stopped.
	mux.HandleFunc("POST /services/{name}/scale", func(w http.ResponseWriter, r *http.Request) {
		var req ScaleRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want {\"instances\": N}: %w", err))
			return
		}
		v, err := s.scaleTo(r.Context(), r.PathValue("name"), req.Instances)
		writeScale(w, v, err)
	})
}

func (c *control) list(context.Context) ([]ServiceView, error) { return c.views(), nil }

func (c *control) one(_ context.Context, name string) (ServiceView, error) { return c.view(name) }

func (c *control) halt(_ context.Context, name string) (ServiceView, error) { return c.stop(name) }

func (c *control) scaleTo(ctx context.Context, name string, n int) (ScaleView, error) {
	if err := c.scale.scale(ctx, name, n); err != nil {
		return ScaleView{}, err
	}
	return c.scaleView(name), nil
}

// decodeRestart reads a restart request's env, answering 400 itself when
// it is not one.
func decodeRestart(w http.ResponseWriter, r *http.Request) (map[string]string, bool) {
	var req RestartRequest
	if r.ContentLength != 0 {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want {\"env\":{\"NAME\":\"value\"}}: %w", err))
			return nil, false
		}
	}
	for k, v := range req.Env {
		if !envName.MatchString(k) || strings.ContainsRune(v, 0) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("env: %q is not a valid variable", k))
			return nil, false
		}
		if !restartVarAllowed(k) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("env: a restart may not set %s: allowed are %s", k, RestartVarsAllowed))
			return nil, false
		}
	}
	return req.Env, true
}

// exitTimeout reads ?timeout= (default 30 s), answering 400 itself when it
// is not a positive duration.
func exitTimeout(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	t := r.URL.Query().Get("timeout")
	if t == "" {
		return 30 * time.Second, true
	}
	d, err := time.ParseDuration(t)
	if err != nil || d <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("timeout %q: want a positive duration such as 30s", t))
		return 0, false
	}
	return d, true
}

// answer writes v, or err with its status.
func answer(w http.ResponseWriter, v ServiceView, err error) {
	var notReady *NotReadyError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, ErrUnknownService):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrRestartInProgress):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, ErrStillRunning):
		writeError(w, http.StatusGatewayTimeout, err)
	case errors.As(err, &notReady):
		writeError(w, http.StatusBadGateway, err)
	case errors.Is(err, supervise.ErrStopped):
		writeError(w, http.StatusServiceUnavailable, err)
	default:
		writeError(w, http.StatusInternalServerError, err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func envList(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + env[k]
	}
	return out
}

// describeEnv names the variables a restart added, never their values.
func describeEnv(env map[string]string) string {
	if len(env) == 0 {
		return " with its usual environment"
	}
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	return " with " + strings.Join(names, ", ") + " set"
}
