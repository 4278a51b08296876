package devrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
	"github.com/reliable-orders/fulfillment/scripts/suite"
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

// notReady is a NotReadyError, or nil without a reason.
func notReady(service, reason string) error {
	if reason == "" {
		return nil
	}
	return &NotReadyError{Service: service, Reason: reason}
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("%s did not become ready after the restart: %s", e.Service, e.Reason)
}

// supervisor is what the local backend needs of make run's supervisor:
// restart a service, stop it for an outage, and start and remove the
// extra instances of a scale request.
type supervisor interface {
	Start(ctx context.Context, spec supervise.Spec) error
	RestartWith(name string, env []string) (int, error)
	StopChild(name string) error
	Remove(name string) error
	PID(name string) (int, bool)
}

// proc is one process of make run's suite: a service's own (instance 1)
// or an extra instance of a consumer (scale).
type proc struct {
	svc suite.Service
	k   int
	run int
	env map[string]string // the extra environment of this run
	// starting is set while a restart, or an instance's start, waits for
	// readiness.
	starting bool
	stopped  bool            // stopped by the control API (halt)
	exit     *supervise.Exit // set once this run has exited
	done     chan struct{}   // closed once this run has exited or stopped
}

func (p *proc) name() string { return InstanceName(p.svc.Name, p.k) }

// view is the process's state; pid tells a running one's process id.
func (p *proc) view(pid func(string) (int, bool)) controlapi.ServiceView {
	v := controlapi.ServiceView{Name: p.name(), Service: p.svc.Name, Instance: p.k, State: "running", Run: p.run, Env: p.env,
		URL: loopbackURL(InstancePort(p.svc.Port, p.k))}
	switch {
	case p.exit != nil:
		exitedView(&v, p.exit.Code(), p.exit.String())
		return v
	case p.stopped:
		v.State = "stopped"
	case p.starting && p.k > 1:
		v.State = "starting"
	case p.starting:
		v.State = "restarting"
	}
	if id, ok := pid(p.name()); ok {
		v.PID = id
	}
	return v
}

// exitedView marks v as a process that exited with code, said as exit.
func exitedView(v *controlapi.ServiceView, code int, exit string) {
	v.State, v.ExitCode, v.FailPoint, v.Exit = "exited", &code, code == FailPointExitCode, exit
}

// control is the runner's view of its processes for the control API: it
// restarts and stops services, scales the consumers (scale.go), reports
// exits and decides which exits the suite survives.
type control struct {
	ctx          context.Context // the runner's: instances stop with it
	sup          supervisor
	specs        map[string]supervise.Spec // each service's, for its instances
	reserved     map[int]string            // ports the suite uses for something else
	client       *http.Client
	readyTimeout time.Duration
	log          *prefixed
	controlURL   string
	// broker is the embedded broker; nil when KAFKA_BROKERS is external.
	broker *brokerControl

	mu      sync.Mutex
	procs   map[string]*proc // by name: the services and their instances
	scaling map[string]bool  // a scale request of the service is under way
}

func newControl(ctx context.Context, sup supervisor, broker *brokerControl, cfg Config, specs map[string]supervise.Spec, log *prefixed) *control {
	c := &control{
		ctx: ctx, sup: sup, specs: specs, broker: broker, log: log,
		reserved:     map[int]string{},
		client:       &http.Client{Timeout: 2 * time.Second},
		readyTimeout: cfg.ReadyTimeout,
		controlURL:   "http://" + cfg.ControlAddr,
		procs:        map[string]*proc{},
		scaling:      map[string]bool{},
	}
	for _, s := range cfg.Services {
		// The runner's own start is a fresh supervisor's first run.
		c.procs[s.Name] = &proc{svc: s, k: 1, run: 1, done: make(chan struct{})}
		c.reserved[s.Port] = s.FullName()
	}
	for _, p := range addrPorts(cfg.ControlAddr, cfg.BrokerAddr) {
		c.reserved[p] = "the runner"
	}
	return c
}

// expected records e and reports whether the suite carries on without the
// process: an exit of a process already replaced, stopped or removed, an
// exit while a restart or scale request waits for it (whose caller is
// told), and a fail point's exit (status 137), after which it stays down
// until it is restarted or scaled again. Any other exit is a crash, and
// the runner stops everything.
func (c *control) expected(e supervise.Exit) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[e.Name]
	switch {
	case !ok:
		// An instance a scale-down removed is not reported; a service is
		// always known.
		return strings.Contains(e.Name, "#")
	case e.Run < p.run || p.stopped || p.exit != nil:
		return true
	}
	p.exit = &e
	close(p.done)
	if e.Code() == FailPointExitCode {
		until := fmt.Sprintf("POST %s/services/%s/restart", c.controlURL, e.Name)
		if p.k > 1 {
			until = "the next scale request"
		}
		c.log.Printf("%s exited with status %d: an armed fail point; it stays down until %s", e.Name, FailPointExitCode, until)
		return true
	}
	return p.starting || p.k > 1 && c.scaling[p.svc.Name]
}

// serviceOf returns a service's own process among procs, refusing one
// whose restart is under way. The caller holds the lock procs are kept
// under.
func serviceOf(procs map[string]*proc, name string) (*proc, error) {
	p, ok := procs[name]
	switch {
	case !ok || p.k != 1:
		return nil, fmt.Errorf("%w: %q", ErrUnknownService, name)
	case p.starting:
		return nil, fmt.Errorf("%s: %w", name, ErrRestartInProgress)
	}
	return p, nil
}

// restart restarts name with env added to its usual environment and waits
// until it answers /readyz. The lock is held while the supervisor swaps the
// process, so an exit report is never matched with the wrong run.
func (c *control) restart(ctx context.Context, name string, env map[string]string) (controlapi.ServiceView, error) {
	c.mu.Lock()
	p, err := serviceOf(c.procs, name)
	run := 0
	if err == nil {
		if run, err = c.sup.RestartWith(name, envList(env)); err == nil {
			p.run, p.env, p.exit, p.done, p.starting, p.stopped = run, env, nil, make(chan struct{}), true, false
		}
	}
	c.mu.Unlock()
	if err != nil {
		return controlapi.ServiceView{}, err
	}
	c.log.Printf("%s restarted (run %d) by the control API%s", name, run, describeEnv(env))
	err = c.waitReady(ctx, p)
	v, _ := c.one(ctx, name)
	return v, err
}

// waitReady waits until p answers /readyz, failing once it has exited.
func (c *control) waitReady(ctx context.Context, p *proc) error {
	c.mu.Lock()
	done := p.done
	c.mu.Unlock()
	url := loopbackURL(InstancePort(p.svc.Port, p.k)) + "/readyz"
	err := awaitReady(ctx, c.client, c.readyTimeout, pollInterval, p.name(), url, func() (string, error) {
		select {
		case <-done:
			c.mu.Lock()
			defer c.mu.Unlock()
			return p.exit.String(), nil
		default:
			return "", nil
		}
	})
	c.mu.Lock()
	p.starting = false
	c.mu.Unlock()
	return err
}

// halt stops name and leaves it down until a restart: an outage drill
// takes a service away (the order service, for the payment callbacks).
// Its end is asked for, so the supervisor does not report it and the
// suite carries on. The lock is held while the process stops, as in
// restart, so an exit report is never matched with the wrong state.
func (c *control) halt(_ context.Context, name string) (controlapi.ServiceView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, err := serviceOf(c.procs, name)
	if err != nil || p.stopped {
		return c.viewLocked(p), err
	}
	if err := c.sup.StopChild(name); err != nil {
		return controlapi.ServiceView{}, err
	}
	if p.exit == nil {
		close(p.done)
	}
	p.stopped = true
	c.log.Printf("%s stopped by the control API; it stays down until POST %s/services/%s/restart", name, c.controlURL, name)
	return c.viewLocked(p), nil
}

func (c *control) viewLocked(p *proc) controlapi.ServiceView {
	if p == nil {
		return controlapi.ServiceView{}
	}
	return p.view(c.sup.PID)
}

func (c *control) one(_ context.Context, name string) (controlapi.ServiceView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.procs[name]
	if !ok {
		return controlapi.ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	}
	return c.viewLocked(p), nil
}

// list is every process of the suite: the services' own and the extra
// instances of a scale request, by name.
func (c *control) list(context.Context) ([]controlapi.ServiceView, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]controlapi.ServiceView, 0, len(c.procs))
	for _, p := range c.procs {
		out = append(out, c.viewLocked(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// envName is what the control API accepts as a variable name.
var envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// handler serves the control API to this machine's programs only (guard):
//
//	GET  /services                        every service's state
//	GET  /services/{name}                 one service's state
//	POST /services/{name}/restart         {"env":{...}}: restart, wait until ready
//	GET  /services/{name}/exit?timeout=30s  wait until the current process ends
//	POST /services/{name}/stop            stop it; it stays down until a restart
//	POST /services/{name}/scale           {"instances":N}: run N processes of a consumer (scale.go)
//	GET  /broker, POST /broker/stop|start, POST|DELETE /broker/faults  the embedded broker (brokerctl.go)
func (c *control) handler() http.Handler {
	mux := http.NewServeMux()
	serviceRoutes(mux, c, pollInterval)
	brokerRoutes(mux, c.broker)
	return guard(mux)
}

// services is what the /services routes drive: make run's processes
// (control) or the compose project's containers (ComposeControl).
type services interface {
	list(ctx context.Context) ([]controlapi.ServiceView, error)
	one(ctx context.Context, name string) (controlapi.ServiceView, error)
	restart(ctx context.Context, name string, env map[string]string) (controlapi.ServiceView, error)
	halt(ctx context.Context, name string) (controlapi.ServiceView, error)
	scaleTo(ctx context.Context, name string, n int) (controlapi.ScaleView, error)
}

// serviceRoutes adds the /services routes of the control API over s, which
// an exit wait asks every interval.
func serviceRoutes(mux *http.ServeMux, s services, interval time.Duration) {
	mux.HandleFunc("GET /services", func(w http.ResponseWriter, r *http.Request) {
		vs, err := s.list(r.Context())
		answer(w, controlapi.ServicesView{Services: vs}, err)
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
		var v controlapi.ServiceView
		err := poll(r.Context(), timeout, interval, func(late bool) (bool, error) {
			var err error
			v, err = s.one(r.Context(), r.PathValue("name"))
			if late && err == nil && v.State != "exited" && v.State != "stopped" {
				err = fmt.Errorf("%s: %w after %s", v.Name, ErrStillRunning, timeout)
			}
			return v.State == "exited" || v.State == "stopped", err
		})
		answer(w, v, err)
	})
	// POST /services/{name}/scale {"instances": N} answers once the new
	// instances are ready and the surplus ones have stopped.
	mux.HandleFunc("POST /services/{name}/scale", func(w http.ResponseWriter, r *http.Request) {
		var req controlapi.ScaleRequest
		if err := decodeBody(r, &req, false); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("body: want {\"instances\": N}: %w", err))
			return
		}
		v, err := s.scaleTo(r.Context(), r.PathValue("name"), req.Instances)
		answer(w, v, err)
	})
}

// decodeRestart reads a restart request's env, answering 400 itself when
// it is not one.
func decodeRestart(w http.ResponseWriter, r *http.Request) (map[string]string, bool) {
	var req controlapi.RestartRequest
	if err := decodeBody(r, &req, true); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body: want {\"env\":{\"NAME\":\"value\"}}: %w", err))
		return nil, false
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
func answer(w http.ResponseWriter, v any, err error) {
	if err != nil {
		writeError(w, statusOf(err), err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// statusOf is the HTTP status every route of the control API answers err
// with: a request no backend can carry out is 400, one that conflicts
// with what the suite is doing, or with what the backend owns, 409.
func statusOf(err error) int {
	var notReady *NotReadyError
	switch {
	case errors.Is(err, ErrNotConsumer), errors.Is(err, ErrBadInstances), errors.Is(err, errBadFault):
		return http.StatusBadRequest
	case errors.Is(err, ErrRestartInProgress), errors.Is(err, ErrScaleInProgress), errors.Is(err, ErrPortTaken),
		errors.Is(err, ErrExternalBroker), errors.Is(err, ErrBrokerStopped), errors.Is(err, ErrNoComposeFault):
		return http.StatusConflict
	case errors.Is(err, ErrUnknownService):
		return http.StatusNotFound
	case errors.Is(err, ErrStillRunning):
		return http.StatusGatewayTimeout
	case errors.As(err, &notReady):
		return http.StatusBadGateway
	case errors.Is(err, supervise.ErrStopped):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// decodeBody reads a JSON body of at most 64 KiB into v, refusing unknown
// fields; an optional one may be empty.
func decodeBody(r *http.Request, v any, optional bool) error {
	if optional && r.ContentLength == 0 {
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
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
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// describeEnv names the variables a restart added, never their values.
func describeEnv(env map[string]string) string {
	if len(env) == 0 {
		return " with its usual environment"
	}
	return " with " + strings.Join(slices.Sorted(maps.Keys(env)), ", ") + " set"
}
