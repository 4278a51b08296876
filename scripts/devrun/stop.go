package devrun

import (
	"errors"
	"fmt"
)

// errCannotStop is a supervisor that cannot stop one child alone.
var errCannotStop = errors.New("the runner cannot stop a single service")

// stopper is the supervisor's StopChild: an outage drill takes a service
// away (the order service, for the payment callbacks) and brings it back
// with POST /services/{name}/restart.
type stopper interface {
	StopChild(name string) error
}

// stop stops name and leaves it down until a restart. Its end is asked
// for, so the supervisor does not report it and the suite carries on; a
// wait for its exit returns at once with state "stopped".
func (c *control) stop(name string) (ServiceView, error) {
	sup, ok := c.sup.(stopper)
	if !ok {
		return ServiceView{}, errCannotStop
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.services[name]
	switch {
	case !ok:
		return ServiceView{}, fmt.Errorf("%w: %q", ErrUnknownService, name)
	case st.restarting:
		return ServiceView{}, fmt.Errorf("%s: %w", name, ErrRestartInProgress)
	case st.stopped:
		return st.view(name), nil
	}
	// The lock is held while the process stops, as in restart, so an exit
	// report is never matched with the wrong state.
	if err := sup.StopChild(name); err != nil {
		return ServiceView{}, err
	}
	if st.exit == nil {
		close(st.done)
	}
	st.stopped = true
	c.log.Printf("%s stopped by the control API; it stays down until POST %s/services/%s/restart", name, c.controlURL, name)
	return st.view(name), nil
}
