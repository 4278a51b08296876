package devrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// MaxInstances bounds a scale request (suite.MaxInstances).
const MaxInstances = suite.MaxInstances

// InstancePortStep separates the ports of one service's instances:
// instance k (k ≥ 2) of a service on port P listens on P + 100·(k−1), so
// inventory (8083) runs inventory#2 on 8183 … inventory#12 on 9183.
const InstancePortStep = 100

// Errors of the scale request, each answered with its own HTTP status.
var (
	// ErrNotConsumer refuses to scale a service that belongs to no consumer
	// group: more instances of it would not share any work.
	ErrNotConsumer = errors.New("not a consumer service")
	// ErrBadInstances is an instance count outside 1..MaxInstances.
	ErrBadInstances = errors.New("bad instance count")
	// ErrScaleInProgress refuses a second scale request for a service while
	// the first one is starting or stopping instances.
	ErrScaleInProgress = errors.New("a scale request for this service is in progress")
	// ErrPortTaken is an instance port another process listens on, or one
	// the suite reserves for something else.
	ErrPortTaken = errors.New("instance port taken")
)

// InstanceName is the name of instance k of service ("inventory#2"):
// instance 1 is the service itself.
func InstanceName(service string, k int) string {
	if k <= 1 {
		return service
	}
	return service + "#" + strconv.Itoa(k)
}

// InstancePort is the port of instance k of a service listening on base.
func InstancePort(base, k int) int { return base + InstancePortStep*(k-1) }

// ScaleRequest is the body of POST /services/{name}/scale
// (controlapi.ScaleRequest).
type ScaleRequest = controlapi.ScaleRequest

// ScaleView answers a scale request (controlapi.ScaleView).
type ScaleView = controlapi.ScaleView

// instanceRunner is what scaling needs of the supervisor.
type instanceRunner interface {
	Start(ctx context.Context, spec supervise.Spec) error
	Remove(name string) error
	PID(name string) (int, bool)
}

// instance is one extra process of a consumer service.
type instance struct {
	service string
	k       int
	port    int
	ready   bool            // it has answered /readyz since it started
	exit    *supervise.Exit // set once it has exited on its own
	done    chan struct{}   // closed then
}

func (in *instance) name() string { return InstanceName(in.service, in.k) }

func (in *instance) exited() bool { return in.exit != nil }

// scaler starts and stops extra instances of the consumer services: the
// same binary and environment as the service, the same CONSUMER_GROUP, its
// own HTTP_ADDR. They run until scaled down or the runner stops.
type scaler struct {
	ctx          context.Context // the runner's: instances stop with it
	sup          instanceRunner
	specs        map[string]supervise.Spec
	services     map[string]suite.Service
	reserved     map[int]string // ports the suite uses for something else
	client       *http.Client
	readyTimeout time.Duration
	log          *prefixed

	mu      sync.Mutex
	scaling map[string]bool
	extras  map[string][]*instance // by service, instance 2, 3, … in order
}

func newScaler(ctx context.Context, sup instanceRunner, cfg Config, specs map[string]supervise.Spec, log *prefixed) *scaler {
	sc := &scaler{
		ctx:          ctx,
		sup:          sup,
		specs:        specs,
		services:     map[string]suite.Service{},
		reserved:     map[int]string{},
		client:       &http.Client{Timeout: 2 * time.Second},
		readyTimeout: cfg.ReadyTimeout,
		log:          log,
		scaling:      map[string]bool{},
		extras:       map[string][]*instance{},
	}
	for _, s := range cfg.Services {
		sc.services[s.Name] = s
		sc.reserved[s.Port] = s.FullName()
	}
	for _, p := range addrPorts(cfg.ControlAddr, cfg.BrokerAddr) {
		sc.reserved[p] = "the runner"
	}
	return sc
}

// CheckInstancePorts reports every instance port (instances 2 …
// MaxInstances of each consumer service) that falls on a port the suite
// uses for something else: a service, the control API or the broker.
func CheckInstancePorts(services []suite.Service, other ...int) error {
	taken := map[int]string{}
	for _, s := range services {
		taken[s.Port] = s.FullName()
	}
	for _, p := range other {
		taken[p] = "the runner"
	}
	var errs []error
	for _, s := range services {
		if s.ConsumerGroup == "" {
			continue
		}
		for k := 2; k <= MaxInstances; k++ {
			p := InstancePort(s.Port, k)
			if who, ok := taken[p]; ok {
				errs = append(errs, fmt.Errorf("%s would listen on %d, which is %s's", InstanceName(s.Name, k), p, who))
			}
			taken[p] = InstanceName(s.Name, k)
		}
	}
	return errors.Join(errs...)
}

// addrPorts are the ports of host:port addresses; others are skipped.
func addrPorts(addrs ...string) []int {
	var out []int
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err == nil {
			if p, err := strconv.Atoi(port); err == nil && p > 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// owns reports whether name is an extra instance's.
func (sc *scaler) owns(name string) bool {
	service, _, ok := strings.Cut(name, "#")
	_, known := sc.services[service]
	return ok && known
}

// expected records the exit of an extra instance and reports whether the
// suite carries on, by the rules of the service itself: a fail point's
// exit (status 137) and an exit while its scale request waits for it
// (whose caller is told) are expected; any other is a crash. Instances
// stopped by a scale-down are not reported at all.
func (sc *scaler) expected(e supervise.Exit) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	service, _, _ := strings.Cut(e.Name, "#")
	for _, in := range sc.extras[service] {
		if in.name() != e.Name || in.exited() {
			continue
		}
		in.exit = &e
		close(in.done)
		switch {
		case e.Code() == FailPointExitCode:
			sc.log.Printf("%s exited with status %d: an armed fail point; it stays down until the next scale request", e.Name, FailPointExitCode)
			return true
		case sc.scaling[service]:
			return true
		}
		return false
	}
	return true // an instance already stopped and forgotten
}

// scale starts or stops extra instances until n processes of service run
// (the service's own included), waits until the new ones are ready and
// stops the surplus ones gracefully, the highest-numbered first. An
// instance that had exited is started again if it is within n.
func (sc *scaler) scale(ctx context.Context, service string, n int) error {
	s, ok := sc.services[service]
	switch {
	case !ok:
		return fmt.Errorf("%w: %q", ErrUnknownService, service)
	case s.ConsumerGroup == "":
		return fmt.Errorf("%s: %w: only the consumers share work through a group", service, ErrNotConsumer)
	case n < 1 || n > MaxInstances:
		return fmt.Errorf("%w %d: want 1 to %d (the topic has %d partitions)", ErrBadInstances, n, MaxInstances, suite.Partitions)
	}
	sc.mu.Lock()
	if sc.scaling[service] {
		sc.mu.Unlock()
		return fmt.Errorf("%s: %w", service, ErrScaleInProgress)
	}
	sc.scaling[service] = true
	var surplus, started []*instance
	keep := sc.extras[service][:0:0]
	for _, in := range sc.extras[service] {
		switch {
		case in.k > n:
			surplus = append(surplus, in)
		case in.exited():
			// forgotten below and started again
		default:
			keep = append(keep, in)
		}
	}
	var err error
	for k := 2; k <= n && err == nil; k++ {
		if slices.ContainsFunc(keep, func(in *instance) bool { return in.k == k }) {
			continue
		}
		var in *instance
		if in, err = sc.startLocked(s, k); err == nil {
			keep = append(keep, in)
			started = append(started, in)
		}
	}
	slices.SortFunc(keep, func(a, b *instance) int { return a.k - b.k })
	sc.extras[service] = keep
	sc.mu.Unlock()

	defer func() {
		sc.mu.Lock()
		sc.scaling[service] = false
		sc.mu.Unlock()
	}()
	errs := []error{err}
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, in := range started {
		wg.Go(func() {
			if err := sc.waitReady(ctx, in); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	slices.SortFunc(surplus, func(a, b *instance) int { return b.k - a.k })
	for _, in := range surplus {
		wg.Go(func() {
			if err := sc.sup.Remove(in.name()); err != nil && !sc.hasExited(in) {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(started) > 0 || len(surplus) > 0 {
		sc.log.Printf("%s scaled to %d instance(s) by the control API (started %d, stopped %d)", service, n, len(started), len(surplus))
	}
	return errors.Join(errs...)
}

// hasExited reads in.exit under the scaler's lock.
func (sc *scaler) hasExited(in *instance) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return in.exited()
}

// startLocked starts instance k of s with the service's own spec but for
// its name and HTTP_ADDR.
func (sc *scaler) startLocked(s suite.Service, k int) (*instance, error) {
	name := InstanceName(s.Name, k)
	port := InstancePort(s.Port, k)
	if who, ok := sc.reserved[port]; ok {
		return nil, fmt.Errorf("%s: %w: %d is %s's", name, ErrPortTaken, port, who)
	}
	if port > 65535 {
		return nil, fmt.Errorf("%s: %w: %d is not a port", name, ErrPortTaken, port)
	}
	l, err := net.Listen("tcp", suite.LoopbackAddr(port))
	if err != nil {
		return nil, fmt.Errorf("%s: %w: another process listens on %d: %w", name, ErrPortTaken, port, err)
	}
	l.Close()
	spec, ok := sc.specs[s.Name]
	if !ok {
		return nil, fmt.Errorf("%w: no process spec for %q", ErrUnknownService, s.Name)
	}
	spec.Name = name
	spec.Env = InstanceEnv(spec.Env, port)
	if err := sc.sup.Start(sc.ctx, spec); err != nil {
		return nil, err
	}
	return &instance{service: s.Name, k: k, port: port, done: make(chan struct{})}, nil
}

func (sc *scaler) waitReady(ctx context.Context, in *instance) error {
	err := awaitReady(ctx, sc.client, sc.readyTimeout, in.name(), fmt.Sprintf("http://127.0.0.1:%d/readyz", in.port), in.done, func() string {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return in.exit.String()
	})
	if err == nil {
		sc.mu.Lock()
		in.ready = true
		sc.mu.Unlock()
	}
	return err
}

// views are the extra instances of every service, sorted by name.
func (sc *scaler) views() []ServiceView {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []ServiceView
	for _, list := range sc.extras {
		for _, in := range list {
			out = append(out, sc.viewLocked(in))
		}
	}
	return out
}

// view is one extra instance's state.
func (sc *scaler) view(name string) (ServiceView, bool) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	service, _, _ := strings.Cut(name, "#")
	for _, in := range sc.extras[service] {
		if in.name() == name {
			return sc.viewLocked(in), true
		}
	}
	return ServiceView{}, false
}

func (sc *scaler) viewLocked(in *instance) ServiceView {
	v := ServiceView{
		Name: in.name(), Service: in.service, Instance: in.k, State: "running", Run: 1,
		URL: fmt.Sprintf("http://127.0.0.1:%d", in.port),
	}
	if in.exited() {
		code := in.exit.Code()
		v.State, v.ExitCode, v.FailPoint, v.Exit = "exited", &code, code == FailPointExitCode, in.exit.String()
		return v
	}
	if !in.ready {
		v.State = "starting"
	}
	if pid, ok := sc.sup.PID(in.name()); ok {
		v.PID = pid
	}
	return v
}

// describe adds to v, a view of a service's own process, what the view of
// an instance says too: the service, instance 1, its URL and pid.
func (sc *scaler) describe(v *ServiceView) {
	s, ok := sc.services[v.Name]
	if !ok {
		return
	}
	v.Service, v.Instance, v.URL = s.Name, 1, s.LocalURL()
	if pid, ok := sc.sup.PID(s.Name); ok && v.State != "exited" {
		v.PID = pid
	}
}

// writeScale answers a scale request: v, or err with its status.
func writeScale(w http.ResponseWriter, v ScaleView, err error) {
	switch {
	case errors.Is(err, ErrNotConsumer), errors.Is(err, ErrBadInstances):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, ErrScaleInProgress), errors.Is(err, ErrPortTaken):
		writeError(w, http.StatusConflict, err)
	case err != nil:
		answer(w, ServiceView{}, err)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// scaleView lists every instance of service, its own process first.
func (c *control) scaleView(service string) ScaleView {
	out := ScaleView{Service: service, Instances: []ServiceView{}}
	for _, v := range c.views() {
		if v.Name == service || v.Service == service {
			out.Instances = append(out.Instances, v)
		}
	}
	return out
}

// InstanceEnv is the environment of an extra instance listening on port:
// its service's env with HTTP_ADDR on loopback, like the service's own.
func InstanceEnv(env []string, port int) []string {
	// os/exec keeps the last of duplicate names, so this HTTP_ADDR wins.
	return append(slices.Clip(env), "HTTP_ADDR="+suite.LoopbackAddr(port))
}
