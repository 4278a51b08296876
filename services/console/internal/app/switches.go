package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// FailPointSuite is what the switches read and arm of the services' fail
// points; *suiteapi.Client is one.
type FailPointSuite interface {
	FailPoints(ctx context.Context, service string) ([]suiteapi.FailPoint, error)
	ArmFailPoint(ctx context.Context, service, name, action string, times int) error
}

// ControlAPI is the runner's control API; *controlapi.Client is one.
type ControlAPI interface {
	Services(ctx context.Context) ([]controlapi.ServiceView, error)
	Restart(ctx context.Context, service string, env map[string]string) (controlapi.ServiceView, error)
	Stop(ctx context.Context, service string) (controlapi.ServiceView, error)
	Scale(ctx context.Context, service string, instances int) (controlapi.ScaleView, error)
}

// Switches are what an operator flips in the suite: each service's fail
// points, through its admin API, and, through the runner's control API,
// stopping, starting and scaling a service.
type Switches struct {
	suite   FailPointSuite
	control ControlAPI
	logger  *slog.Logger
}

// NewSwitches returns the switches of suite; control is nil without a
// control API.
func NewSwitches(suite FailPointSuite, control ControlAPI, logger *slog.Logger) *Switches {
	return &Switches{suite: suite, control: control, logger: logger}
}

// ServiceSwitches are one service's switches as they stand.
type ServiceSwitches struct {
	Service    string            `json:"service"`
	FailPoints []failpoint.Point `json:"failPoints"`
	// FailPointsError says why its fail points are not shown: the
	// service is down, or serves none (FAILPOINTS_ENABLED=false).
	FailPointsError string `json:"failPointsError,omitempty"`
	// Processes are its processes as the runner sees them: its own, then
	// its extra instances; none without a control API.
	Processes []controlapi.ServiceView `json:"processes"`
}

// SwitchesView is every service's switches.
type SwitchesView struct {
	Services []ServiceSwitches `json:"services"`
	// Controlled says a control API is configured; ControlError why it
	// did not answer.
	Controlled   bool   `json:"controlled"`
	ControlError string `json:"controlError,omitempty"`
}

// ErrNoControl is a stop, start or scale without a control API.
var ErrNoControl = errors.New("no control API: the console was started without CONTROL_URL (make run gives it one; under compose, stop and start containers with docker compose)")

// ErrUnknownService is a name that is not one of the six services.
var ErrUnknownService = errors.New("no such service")

// State reads every service's fail points and the runner's view of its
// processes, side by side.
func (s *Switches) State(ctx context.Context) SwitchesView {
	v := SwitchesView{Controlled: s.control != nil, Services: make([]ServiceSwitches, len(Services))}
	var mu sync.Mutex
	var g errgroup.Group
	for i, svc := range Services {
		v.Services[i] = ServiceSwitches{Service: svc, FailPoints: []failpoint.Point{}, Processes: []controlapi.ServiceView{}}
		g.Go(func() error {
			points, err := s.suite.FailPoints(ctx, svc)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				v.Services[i].FailPointsError = err.Error()
				if suiteapi.IsStatus(err, 404) {
					v.Services[i].FailPointsError = "it serves no fail points (FAILPOINTS_ENABLED=false)"
				}
			} else {
				v.Services[i].FailPoints = points
			}
			return nil
		})
	}
	if s.control != nil {
		g.Go(func() error {
			procs, err := s.control.Services(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				v.ControlError = err.Error()
				return nil
			}
			for _, p := range procs {
				name := p.Service
				if name == "" {
					name = p.Name
				}
				if i := slices.Index(Services, name); i >= 0 {
					v.Services[i].Processes = append(v.Services[i].Processes, p)
				}
			}
			return nil
		})
	}
	_ = g.Wait() // every error is in v
	for i := range v.Services {
		slices.SortFunc(v.Services[i].Processes, func(a, b controlapi.ServiceView) int { return max(a.Instance, 1) - max(b.Instance, 1) })
	}
	return v
}

func known(service string) error {
	if !slices.Contains(Services, service) {
		return fmt.Errorf("%w: %q", ErrUnknownService, service)
	}
	return nil
}

// ArmFailPoint arms (or, with action "off", disarms) a service's fail
// point in the name of operator, which the console logs.
func (s *Switches) ArmFailPoint(ctx context.Context, service, name, action string, times int, operator string) error {
	if err := known(service); err != nil {
		return err
	}
	if err := s.suite.ArmFailPoint(ctx, service, name, action, times); err != nil {
		return fmt.Errorf("arm %s's %s: %w", service, name, err)
	}
	s.logger.InfoContext(ctx, "fail point armed", "service", service, "failPoint", name, "action", action, "times", times, "operator", operator)
	return nil
}

// Stop stops a service through the control API; it stays down until
// Start.
func (s *Switches) Stop(ctx context.Context, service, operator string) (controlapi.ServiceView, error) {
	return s.flip(ctx, "stop", service, operator, func(c ControlAPI) (controlapi.ServiceView, error) { return c.Stop(ctx, service) })
}

// Start starts a stopped (or exited) service again, or restarts a running
// one, and answers once it is ready.
func (s *Switches) Start(ctx context.Context, service, operator string) (controlapi.ServiceView, error) {
	return s.flip(ctx, "start", service, operator, func(c ControlAPI) (controlapi.ServiceView, error) { return c.Restart(ctx, service, nil) })
}

// Scale runs instances processes of a consumer.
func (s *Switches) Scale(ctx context.Context, service string, instances int, operator string) (controlapi.ScaleView, error) {
	if err := known(service); err != nil {
		return controlapi.ScaleView{}, err
	}
	if s.control == nil {
		return controlapi.ScaleView{}, ErrNoControl
	}
	v, err := s.control.Scale(ctx, service, instances)
	if err != nil {
		return v, fmt.Errorf("scale %s to %d: %w", service, instances, err)
	}
	s.logger.InfoContext(ctx, "service scaled", "service", service, "instances", instances, "operator", operator)
	return v, nil
}

func (s *Switches) flip(ctx context.Context, what, service, operator string, f func(ControlAPI) (controlapi.ServiceView, error)) (controlapi.ServiceView, error) {
	if err := known(service); err != nil {
		return controlapi.ServiceView{}, err
	}
	if s.control == nil {
		return controlapi.ServiceView{}, ErrNoControl
	}
	v, err := f(s.control)
	if err != nil {
		return v, fmt.Errorf("%s %s: %w", what, service, err)
	}
	s.logger.InfoContext(ctx, "service "+what, "service", service, "state", v.State, "operator", operator)
	return v, nil
}
