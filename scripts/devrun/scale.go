package devrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
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

// beginScale starts a scale request of n instances of the service name,
// as both backends do: it refuses one no backend can carry out, or one
// while another of the service is under way, and otherwise marks it under
// way in scaling and returns the service. The caller holds the lock procs
// and scaling are kept under, and clears scaling[name] when it is done.
func beginScale(procs map[string]*proc, scaling map[string]bool, name string, n int) (suite.Service, error) {
	own := procs[name]
	switch {
	case own == nil || own.k != 1:
		return suite.Service{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	case own.svc.ConsumerGroup == "":
		return suite.Service{}, fmt.Errorf("%s: %w: only the consumers share work through a group", name, ErrNotConsumer)
	case n < 1 || n > MaxInstances:
		return suite.Service{}, fmt.Errorf("%w %d: want 1 to %d (the topic has %d partitions)", ErrBadInstances, n, MaxInstances, suite.Partitions)
	case scaling[name]:
		return suite.Service{}, fmt.Errorf("%s: %w", name, ErrScaleInProgress)
	}
	scaling[name] = true
	return own.svc, nil
}

// scaleViewOf lists the instances of service among views, its own first.
func scaleViewOf(service string, views []controlapi.ServiceView) controlapi.ScaleView {
	out := controlapi.ScaleView{Service: service, Instances: []controlapi.ServiceView{}}
	for _, v := range views {
		if v.Service == service {
			out.Instances = append(out.Instances, v)
		}
	}
	return out
}

// scaleTo starts or stops extra instances until n processes of service run
// (the service's own included): the same binary and environment as the
// service, the same CONSUMER_GROUP, its own HTTP_ADDR. It waits until the
// new ones are ready and stops the surplus ones gracefully. An instance
// that had exited is started again if it is within n. Instances run until
// scaled down or the runner stops.
func (c *control) scaleTo(ctx context.Context, service string, n int) (controlapi.ScaleView, error) {
	c.mu.Lock()
	svc, err := beginScale(c.procs, c.scaling, service, n)
	if err != nil {
		c.mu.Unlock()
		return controlapi.ScaleView{}, err
	}
	var surplus, started []*proc
	for k := 2; k <= MaxInstances && err == nil; k++ {
		p, has := c.procs[InstanceName(service, k)]
		switch {
		case has && k > n:
			surplus = append(surplus, p)
			delete(c.procs, p.name())
		case k > n || has && p.exit == nil:
		default: // missing, or exited: started (again)
			if p, err = c.startLocked(svc, k); err == nil {
				started = append(started, p)
			}
		}
	}
	c.mu.Unlock()

	errs := []error{err}
	var wg sync.WaitGroup
	var emu sync.Mutex
	report := func(err error) {
		emu.Lock()
		errs = append(errs, err)
		emu.Unlock()
	}
	for _, p := range started {
		wg.Go(func() { report(c.waitReady(ctx, p)) })
	}
	for _, p := range surplus {
		wg.Go(func() {
			c.mu.Lock()
			exited := p.exit != nil
			c.mu.Unlock()
			if err := c.sup.Remove(p.name()); !exited {
				report(err)
			}
		})
	}
	wg.Wait()
	if len(started) > 0 || len(surplus) > 0 {
		c.log.Printf("%s scaled to %d instance(s) by the control API (started %d, stopped %d)", service, n, len(started), len(surplus))
	}
	c.mu.Lock()
	c.scaling[service] = false
	c.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return controlapi.ScaleView{}, err
	}
	views, _ := c.list(ctx)
	return scaleViewOf(service, views), nil
}

// startLocked starts instance k of s with the service's own spec but for
// its name and HTTP_ADDR.
func (c *control) startLocked(s suite.Service, k int) (*proc, error) {
	name := InstanceName(s.Name, k)
	port := InstancePort(s.Port, k)
	if who, ok := c.reserved[port]; ok {
		return nil, fmt.Errorf("%s: %w: %d is %s's", name, ErrPortTaken, port, who)
	}
	if port > 65535 {
		return nil, fmt.Errorf("%s: %w: %d is not a port", name, ErrPortTaken, port)
	}
	if err := portFree(suite.LoopbackAddr(port), fmt.Sprintf("port %d", port)); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, ErrPortTaken, err)
	}
	spec, ok := c.specs[s.Name]
	if !ok {
		return nil, fmt.Errorf("%w: no process spec for %q", ErrUnknownService, s.Name)
	}
	spec.Name = name
	spec.Env = InstanceEnv(spec.Env, port)
	if err := c.sup.Start(c.ctx, spec); err != nil {
		return nil, err
	}
	p := &proc{svc: s, k: k, run: 1, starting: true, done: make(chan struct{})}
	c.procs[name] = p
	return p, nil
}

// InstanceEnv is the environment of an extra instance listening on port:
// its service's env with HTTP_ADDR on loopback, like the service's own.
func InstanceEnv(env []string, port int) []string {
	// os/exec keeps the last of duplicate names, so this HTTP_ADDR wins.
	return append(slices.Clip(env), "HTTP_ADDR="+suite.LoopbackAddr(port))
}
