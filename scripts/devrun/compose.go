package devrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// The compose backend of the control API (`make compose-control`, README.md
// (Drills)): the same routes and answers as `make run`'s, served on this
// machine for a suite started by `docker compose up`, and carried out with
// the Docker CLI. docs/decisions.md (Drills under compose) says why each
// route is done the way it is.

// ErrNoComposeFault answers POST /broker/faults under compose when the
// fault proxy does not answer (a compose file without the service
// faultproxy, or the service down): the drill that needs it reports SKIP.
var ErrNoComposeFault = errors.New("the compose suite's fault proxy (service faultproxy) does not answer, and Redpanda cannot lose a Produce acknowledgement itself")

// DefaultFaultProxyURL is where this machine reaches the admin API of the
// compose suite's fault proxy (docker-compose.yml publishes it).
const DefaultFaultProxyURL = "http://127.0.0.1:9094"

// FaultLostConnection is the error a client sees when the fault proxy
// loses an answer: its connection closes instead.
const FaultLostConnection = "connection closed instead of the answer"

// ComposeConfig configures the compose backend.
type ComposeConfig struct {
	// ControlAddr is where the control API listens (CONTROL_ADDR),
	// loopback only.
	ControlAddr string
	// File is the compose file (COMPOSE_FILE's first entry; default
	// docker-compose.yml in Dir).
	File string
	// Dir is the directory docker runs in, the repository root.
	Dir string
	// Project is the compose project name: the file's `name:`.
	Project string
	// Docker is the Docker CLI (DOCKER; default "docker" on PATH).
	Docker string
	// BrokerService is the compose service of the broker.
	BrokerService string
	// BrokerAddr is where this machine reaches the broker.
	BrokerAddr string
	// FaultProxyURL is the admin API of the fault proxy the order
	// service reaches the broker through (scripts/faultproxy).
	FaultProxyURL string
	// Services are the suite's services; compose names each FullName and
	// publishes it on 127.0.0.1 at its Port.
	Services []suite.Service
	// ReadyTimeout bounds a wait for a container to become ready.
	ReadyTimeout time.Duration
	// PollInterval is how often `docker compose ps` and /readyz are asked.
	PollInterval time.Duration
	// FailpointsEnabled is the FAILPOINTS_ENABLED docker compose
	// interpolates into the file when it recreates a container: "true"
	// unless FAILPOINTS_ENABLED says otherwise, since the drills this
	// backend serves arm fail points, and a recreate from a shell without
	// it would turn them off.
	FailpointsEnabled string
}

// LoadComposeConfig reads CONTROL_ADDR, COMPOSE_FILE, COMPOSE_PROJECT_NAME
// and DOCKER and fills in the defaults of everything else.
func LoadComposeConfig(getenv func(string) string) ComposeConfig {
	env := envconfig.New(getenv)
	file, _, _ := strings.Cut(env.String("COMPOSE_FILE", "docker-compose.yml"), string(os.PathListSeparator))
	return ComposeConfig{
		ControlAddr:   env.String("CONTROL_ADDR", DefaultControlAddr),
		File:          file,
		Dir:           ".",
		Project:       env.String("COMPOSE_PROJECT_NAME", "fulfillment"),
		Docker:        env.String("DOCKER", "docker"),
		BrokerService: "redpanda",
		BrokerAddr:    suite.DefaultKafkaBrokers,
		FaultProxyURL: DefaultFaultProxyURL,
		Services:      suite.Services(),
		ReadyTimeout:  DefaultReadyTimeout,
		PollInterval:  pollInterval,
		// The drills arm fail points: a container recreated by a
		// restart keeps them on even when this shell did not set it.
		FailpointsEnabled: env.String("FAILPOINTS_ENABLED", "true"),
	}
}

// Validate reports every setting the backend cannot work with.
func (c ComposeConfig) Validate() error {
	var errs []error
	if err := checkLoopback(c.ControlAddr); err != nil {
		errs = append(errs, fmt.Errorf("CONTROL_ADDR (127.0.0.1:port): %w", err))
	}
	if c.File == "" || c.Dir == "" || c.Project == "" || c.Docker == "" || c.BrokerService == "" || c.FaultProxyURL == "" {
		errs = append(errs, errors.New("compose file, directory, project, docker, broker service and fault proxy are required"))
	}
	if len(c.Services) == 0 {
		errs = append(errs, errors.New("no services"))
	}
	if c.ReadyTimeout <= 0 || c.PollInterval <= 0 {
		errs = append(errs, errors.New("ready timeout and poll interval must be positive"))
	}
	return errors.Join(errs...)
}

// Docker runs the Docker CLI: the compose backend's one way to the engine,
// so its tests can put a fake docker on PATH.
type Docker interface {
	// Run runs docker with args and extra environment (NAME=value) and
	// returns its standard output.
	Run(ctx context.Context, env []string, args ...string) ([]byte, error)
}

// DockerCLI is the docker executable.
type DockerCLI struct {
	// Path is the executable, looked up on PATH when it has no slash.
	Path string
	// Dir is the directory it runs in.
	Dir string
}

// Run runs the executable; a failure carries its standard error.
func (d DockerCLI) Run(ctx context.Context, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, d.Path, args...)
	cmd.Dir = d.Dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", d.Path, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ComposeControl is the control API of a compose suite.
type ComposeControl struct {
	cfg    ComposeConfig
	docker Docker
	client *http.Client
	proxy  *controlapi.Client
	log    *prefixed
	tmp    string // where restart overrides are written

	mu sync.Mutex
	// procs are the services (their run, extra environment, whether the
	// API stopped them or changes them) and the extra instances it started,
	// by name, as make run keeps its processes; a container's state is
	// docker's.
	procs       map[string]*proc
	scaling     map[string]bool // a scale request of the service is under way
	brokerStops int
	brokerDown  bool
}

// NewComposeControl returns the backend; it writes its log to log.
func NewComposeControl(cfg ComposeConfig, docker Docker, log io.Writer) (*ComposeControl, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "compose-control-")
	if err != nil {
		return nil, err
	}
	c := &ComposeControl{
		cfg: cfg, docker: docker, tmp: tmp,
		client:  &http.Client{Timeout: 2 * time.Second},
		proxy:   controlapi.New(cfg.FaultProxyURL, 5*time.Second),
		log:     &prefixed{out: log, prefix: "compose-control | "},
		procs:   map[string]*proc{},
		scaling: map[string]bool{},
	}
	for _, s := range cfg.Services {
		c.procs[s.Name] = &proc{svc: s, k: 1, run: 1}
	}
	return c, nil
}

// Close removes the extra instances the backend started and its
// temporary files.
func (c *ComposeControl) Close(ctx context.Context) error {
	c.mu.Lock()
	scaled := map[string]bool{}
	for _, p := range c.procs {
		if p.k > 1 {
			scaled[p.svc.Name] = true
		}
	}
	c.mu.Unlock()
	var errs []error
	for name := range scaled {
		if _, err := c.scaleTo(ctx, name, 1); err != nil && !errors.Is(err, ErrScaleInProgress) {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, os.RemoveAll(c.tmp))...)
}

// compose runs `docker compose` on the suite's file, with overrides after
// it.
func (c *ComposeControl) compose(ctx context.Context, env []string, overrides []string, args ...string) ([]byte, error) {
	env = append([]string{"FAILPOINTS_ENABLED=" + c.cfg.FailpointsEnabled}, env...)
	full := []string{"compose", "-p", c.cfg.Project, "-f", c.cfg.File}
	for _, o := range overrides {
		full = append(full, "-f", o)
	}
	return c.docker.Run(ctx, env, append(full, args...)...)
}

// container is the part of `docker compose ps --format json` the backend
// reads.
type container struct {
	Name     string `json:"Name"`
	Service  string `json:"Service"`
	State    string `json:"State"`
	Health   string `json:"Health"`
	ExitCode int    `json:"ExitCode"`
}

// ps lists the containers of the suite's services, stopped ones too. Compose
// prints a JSON array (before v2.21) or one object a line (since).
func (c *ComposeControl) ps(ctx context.Context, services ...string) (map[string]container, error) {
	out, err := c.compose(ctx, nil, nil, append([]string{"ps", "--all", "--format", "json"}, services...)...)
	if err != nil {
		return nil, err
	}
	var list []container
	trimmed := bytes.TrimSpace(out)
	if bytes.HasPrefix(trimmed, []byte("[")) {
		if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, fmt.Errorf("docker compose ps: %w", err)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for dec.More() {
			var ct container
			if err := dec.Decode(&ct); err != nil {
				return nil, fmt.Errorf("docker compose ps: %w", err)
			}
			list = append(list, ct)
		}
	}
	byService := map[string]container{}
	for _, ct := range list {
		// The extra instances are one-off containers, which ps leaves
		// out; should a version list them, the service's own still wins.
		if strings.Contains(ct.Name, "-extra-") {
			continue
		}
		byService[ct.Service] = ct
	}
	return byService, nil
}

// change carries out do on name's container, one change of a service at
// a time, and answers the service's state once it is done.
func (c *ComposeControl) change(ctx context.Context, name string, do func(st *proc) error) (controlapi.ServiceView, error) {
	c.mu.Lock()
	st, err := serviceOf(c.procs, name)
	if err == nil {
		st.starting = true
	}
	c.mu.Unlock()
	if err != nil {
		return controlapi.ServiceView{}, err
	}
	err = do(st)
	c.mu.Lock()
	st.starting = false
	c.mu.Unlock()
	if err != nil {
		return controlapi.ServiceView{}, err
	}
	return c.one(ctx, name)
}

// restart recreates the service's container, with env added through a
// compose override that also sets `restart: "no"`, so a fail point's exit
// stays down as under make run, and FAILPOINTS_ENABLED when FAILPOINTS is
// set. Without env it is recreated from the compose file alone.
func (c *ComposeControl) restart(ctx context.Context, name string, env map[string]string) (controlapi.ServiceView, error) {
	return c.change(ctx, name, func(st *proc) error {
		var overrides []string
		if len(env) > 0 {
			path, err := c.writeOverride(st.svc, env)
			if err != nil {
				return err
			}
			defer os.Remove(path)
			overrides = append(overrides, path)
		}
		if _, err := c.compose(ctx, nil, overrides, "up", "-d", "--no-deps", "--force-recreate", st.svc.FullName()); err != nil {
			return err
		}
		c.mu.Lock()
		st.run++
		st.env, st.stopped = env, false
		run := st.run
		c.mu.Unlock()
		c.log.Printf("%s recreated (run %d)%s", st.svc.FullName(), run, describeEnv(env))
		return c.waitReady(ctx, name, st.svc.FullName(), st.svc.LocalURL())
	})
}

// composeOverride is a compose file with the one service a restart changes;
// JSON is YAML, so compose reads it as it is.
type composeOverride struct {
	Services map[string]overrideService `json:"services"`
}

type overrideService struct {
	Restart     string            `json:"restart"`
	Environment map[string]string `json:"environment"`
}

func (c *ComposeControl) writeOverride(svc suite.Service, env map[string]string) (string, error) {
	vars := maps.Clone(env) // not nil: restart writes an override only for some env
	if vars["FAILPOINTS"] != "" {
		vars["FAILPOINTS_ENABLED"] = "true"
	}
	raw, err := json.Marshal(composeOverride{Services: map[string]overrideService{
		svc.FullName(): {Restart: "no", Environment: vars},
	}})
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(c.tmp, svc.Name+"-*.yml")
	if err != nil {
		return "", err
	}
	_, werr := f.Write(raw)
	if err := errors.Join(werr, f.Close()); err != nil {
		return "", err
	}
	return filepath.Abs(f.Name())
}

// waitReady polls url/readyz until it answers 200, failing when the
// container of service (none: "") has exited or the timeout passes.
func (c *ComposeControl) waitReady(ctx context.Context, name, service, url string) error {
	return awaitReady(ctx, c.client, c.cfg.ReadyTimeout, c.cfg.PollInterval, name, url+"/readyz", func() (string, error) {
		if service == "" {
			return "", nil
		}
		cts, err := c.ps(ctx, service)
		if ct, ok := cts[service]; ok && (ct.State == "exited" || ct.State == "dead") {
			return fmt.Sprintf("%s exited: exit status %d", name, ct.ExitCode), err
		}
		return "", err
	})
}

// halt stops the service's container; it stays down until a restart.
func (c *ComposeControl) halt(ctx context.Context, name string) (controlapi.ServiceView, error) {
	return c.change(ctx, name, func(st *proc) error {
		if _, err := c.compose(ctx, nil, nil, "stop", st.svc.FullName()); err != nil {
			return err
		}
		c.mu.Lock()
		st.stopped = true
		c.mu.Unlock()
		c.log.Printf("%s stopped; it stays down until POST http://%s/services/%s/restart", st.svc.FullName(), c.cfg.ControlAddr, name)
		return nil
	})
}

// one is a service's state: its container's, and "stopped" once the API
// stopped it.
func (c *ComposeControl) one(ctx context.Context, name string) (controlapi.ServiceView, error) {
	c.mu.Lock()
	st, ok := c.procs[name]
	c.mu.Unlock()
	if !ok || st.k != 1 {
		return controlapi.ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	}
	cts, err := c.ps(ctx, st.svc.FullName())
	if err != nil {
		return controlapi.ServiceView{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.describeLocked(st, cts), nil
}

// describeLocked is a process's state: an extra instance's is the API's,
// a service's its container's.
func (c *ComposeControl) describeLocked(st *proc, cts map[string]container) controlapi.ServiceView {
	v := st.view(func(string) (int, bool) { return 0, false })
	ct, ok := cts[st.svc.FullName()]
	switch {
	case st.k > 1 || st.stopped || st.starting:
	case !ok:
		v.State, v.Exit = "exited", "no container (docker compose up)"
	case ct.State == "exited" || ct.State == "dead":
		exitedView(&v, ct.ExitCode, fmt.Sprintf("%s exited: exit status %d", st.svc.Name, ct.ExitCode))
	default:
		v.State = ct.State // running, created, restarting, paused
	}
	return v
}

// list is every service's and every extra instance's state.
func (c *ComposeControl) list(ctx context.Context) ([]controlapi.ServiceView, error) {
	cts, err := c.ps(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []controlapi.ServiceView
	for _, p := range c.procs {
		out = append(out, c.describeLocked(p, cts))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// extraName is the container of instance k of a service.
func (c *ComposeControl) extraName(s suite.Service, k int) string {
	return fmt.Sprintf("%s-%s-extra-%d", c.cfg.Project, s.FullName(), k)
}

// scaleTo runs n instances of a consumer: instance 1 is the compose service's
// container, each extra one a `docker compose run` container of the same
// service (its environment, network, secrets and CONSUMER_GROUP) that
// publishes its port on 127.0.0.1 at InstancePort, as make run's instances
// listen. Compose's own --scale cannot: its replicas share the one fixed
// host port of the service.
func (c *ComposeControl) scaleTo(ctx context.Context, name string, n int) (controlapi.ScaleView, error) {
	c.mu.Lock()
	s, err := beginScale(c.procs, c.scaling, name, n)
	// Which extra instances run: only a scale request adds or removes one,
	// and this is the service's only one under way.
	has := map[int]bool{}
	for k := 2; k <= MaxInstances; k++ {
		_, has[k] = c.procs[InstanceName(name, k)]
	}
	c.mu.Unlock()
	if err != nil {
		return controlapi.ScaleView{}, err
	}
	defer func() {
		c.mu.Lock()
		c.scaling[name] = false
		c.mu.Unlock()
	}()
	// Highest number first, as make run scales in; each stopped first, so
	// it leaves its group at once.
	for k := MaxInstances; k > n; k-- {
		if !has[k] {
			continue
		}
		for _, verb := range []string{"stop", "rm"} {
			if _, err := c.docker.Run(ctx, nil, verb, c.extraName(s, k)); err != nil {
				return controlapi.ScaleView{}, err
			}
		}
		c.mu.Lock()
		delete(c.procs, InstanceName(name, k))
		c.mu.Unlock()
		c.log.Printf("%s stopped and removed", InstanceName(name, k))
	}
	for k := 2; k <= n; k++ {
		if has[k] {
			continue
		}
		port := InstancePort(s.Port, k)
		if _, err := c.compose(ctx, nil, nil, "run", "-d", "--no-deps", "--name", c.extraName(s, k),
			"-p", fmt.Sprintf("127.0.0.1:%d:%d", port, s.Port), s.FullName()); err != nil {
			return controlapi.ScaleView{}, err
		}
		p := &proc{svc: s, k: k, run: 1, starting: true}
		c.mu.Lock()
		c.procs[p.name()] = p
		c.mu.Unlock()
		err := c.waitReady(ctx, InstanceName(name, k), "", loopbackURL(port))
		c.mu.Lock()
		p.starting = false
		c.mu.Unlock()
		if err != nil {
			return controlapi.ScaleView{}, err
		}
		c.log.Printf("%s ready on 127.0.0.1:%d", InstanceName(name, k), port)
	}
	all, err := c.list(ctx)
	return scaleViewOf(name, all), err
}

// setBroker stops or starts the broker's container; a start waits until
// its health check passes.
func (c *ComposeControl) setBroker(ctx context.Context, start bool) (controlapi.BrokerView, error) {
	verb := "stop"
	if start {
		verb = "start"
	}
	if _, err := c.compose(ctx, nil, nil, verb, c.cfg.BrokerService); err != nil {
		return controlapi.BrokerView{}, err
	}
	c.mu.Lock()
	c.brokerDown = !start
	if !start {
		c.brokerStops++
	}
	c.mu.Unlock()
	if start {
		err := poll(ctx, c.cfg.ReadyTimeout, c.cfg.PollInterval, func(late bool) (bool, error) {
			cts, err := c.ps(ctx, c.cfg.BrokerService)
			ct := cts[c.cfg.BrokerService]
			healthy := ct.State == "running" && (ct.Health == "healthy" || ct.Health == "")
			if err == nil && !healthy && late {
				err = fmt.Errorf("%s not healthy after %s", c.cfg.BrokerService, c.cfg.ReadyTimeout)
			}
			return healthy, err
		})
		if err != nil {
			return controlapi.BrokerView{}, err
		}
	}
	c.log.Printf("%s %s", c.cfg.BrokerService, map[bool]string{true: "started and healthy", false: "stopped"}[start])
	return c.brokerView(), nil
}

func (c *ComposeControl) brokerView() controlapi.BrokerView {
	c.mu.Lock()
	defer c.mu.Unlock()
	state := "running"
	if c.brokerDown {
		state = "stopped"
	}
	return controlapi.BrokerView{State: state, Addr: c.cfg.BrokerAddr, Stops: c.brokerStops}
}

// brokerState is the broker's view with the proxy's fault; a proxy that
// does not answer is the view's error.
func (c *ComposeControl) brokerState(ctx context.Context) controlapi.BrokerView {
	v, _ := c.proxyFault(ctx, http.MethodGet, nil)
	return v
}

// armFault arms a lost acknowledgement on the fault proxy.
func (c *ComposeControl) armFault(ctx context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error) {
	v, err := c.proxyFault(ctx, http.MethodPost, faultproxy.ArmRequest{Topic: req.Topic, Count: req.Count})
	if err == nil {
		c.log.Printf("fault armed on the fault proxy: the next %d Produce requests to %s through it reach %s and lose their answer",
			req.Count, req.Topic, c.cfg.BrokerService)
	}
	return v, err
}

// clearFault removes the proxy's fault; a proxy that does not answer has
// nothing armed, which the view's error says.
func (c *ComposeControl) clearFault(ctx context.Context) (controlapi.BrokerView, error) {
	v, _ := c.proxyFault(ctx, http.MethodDelete, nil)
	return v, nil
}

// proxyFault sends a request to the fault proxy's /fault and adds the
// proxy's fault, as it answers, to the broker view. A proxy that does not
// answer is ErrNoComposeFault, also said as the view's error.
func (c *ComposeControl) proxyFault(ctx context.Context, method string, body any) (controlapi.BrokerView, error) {
	v := c.brokerView()
	var pv faultproxy.View
	if err := c.proxy.Do(ctx, method, "/fault", body, &pv); err != nil {
		err = fmt.Errorf("%w: %w", ErrNoComposeFault, err)
		v.Error = err.Error()
		return v, err
	}
	if f := pv.Fault; f != nil {
		v.Fault = &controlapi.FaultView{FaultRequest: controlapi.FaultRequest{Type: controlapi.FaultLostAck, Count: f.Count, Topic: f.Topic},
			Error: FaultLostConnection, Hits: f.Hits}
	}
	return v, nil
}

// Handler serves the control API's routes (control.go's handler) to this
// machine's programs only. The faults are the fault proxy's.
func (c *ComposeControl) Handler() http.Handler {
	mux := http.NewServeMux()
	serviceRoutes(mux, c, c.cfg.PollInterval)
	brokerRoutes(mux, c)
	return guard(mux)
}

// ServeCompose serves the compose backend on cfg.ControlAddr until ctx
// ends, then removes the extra instances it started.
func ServeCompose(ctx context.Context, cfg ComposeConfig, stdout io.Writer) error {
	c, err := NewComposeControl(cfg, DockerCLI{Path: cfg.Docker, Dir: cfg.Dir}, stdout)
	if err != nil {
		return err
	}
	if _, err := c.ps(ctx); err != nil {
		_ = c.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("the compose suite (docker compose up first): %w", err)
	}
	stop, err := serveControl(ctx, cfg.ControlAddr, c.Handler())
	if err != nil {
		_ = c.Close(context.WithoutCancel(ctx))
		return err
	}
	c.log.Printf("control API of the compose project %s on http://%s (Ctrl-C stops it)", cfg.Project, cfg.ControlAddr)
	<-ctx.Done()
	stop()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	return c.Close(closeCtx)
}

// loopbackURL is the base URL of a port on this machine's loopback.
func loopbackURL(port int) string { return "http://" + suite.LoopbackAddr(port) }
