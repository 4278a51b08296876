// Package failpoint injects faults at named places in the code, so crash and
// failure windows are tested for real. It is compiled in and inert: nothing
// happens unless FAILPOINTS names a point (or an admin arms one at run time).
//
// Spec syntax: "name=action[*count]" separated by commas, e.g.
// "relay.after-publish=exit,inventory.apply=error*2". Actions: "error"
// returns ErrInjected (a retryable failure), "exit" ends the process at once
// with status 137 as SIGKILL would, "panic" panics. Without *count a point
// fires every time it is reached.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ErrInjected is the error an "error" fail point returns.
var ErrInjected = errors.New("injected failure")

// Actions a point can take.
const (
	ActionError = "error"
	ActionExit  = "exit"
	ActionPanic = "panic"
)

type point struct {
	action    string
	remaining int // -1: unlimited
	hits      int
}

// Registry holds the armed points of one process. A nil *Registry is inert.
type Registry struct {
	mu     sync.Mutex
	points map[string]*point
}

// Parse builds a registry from a spec; an empty spec arms nothing.
func Parse(spec string) (*Registry, error) {
	r := &Registry{points: make(map[string]*point)}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rest, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("fail point %q: want name=action[*count]", part)
		}
		action, countText, hasCount := strings.Cut(rest, "*")
		count := -1
		if hasCount {
			n, err := strconv.Atoi(countText)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("fail point %q: count must be a positive integer", part)
			}
			count = n
		}
		if err := r.Set(name, action, count); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Set arms name with action for count hits (-1: every hit); action "off"
// disarms it.
func (r *Registry) Set(name, action string, count int) error {
	switch action {
	case ActionError, ActionExit, ActionPanic:
	case "off":
		r.mu.Lock()
		delete(r.points, name)
		r.mu.Unlock()
		return nil
	default:
		return fmt.Errorf("fail point %s: unknown action %q (want error, exit, panic or off)", name, action)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.points[name] = &point{action: action, remaining: count}
	return nil
}

// Inject fires name if it is armed; otherwise it returns nil.
func (r *Registry) Inject(name string) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	p, ok := r.points[name]
	if !ok || p.remaining == 0 {
		r.mu.Unlock()
		return nil
	}
	if p.remaining > 0 {
		p.remaining--
	}
	p.hits++
	action := p.action
	r.mu.Unlock()

	switch action {
	case ActionExit:
		fmt.Fprintf(os.Stderr, "failpoint %s: exiting\n", name)
		os.Exit(137)
	case ActionPanic:
		panic("failpoint " + name)
	}
	return fmt.Errorf("failpoint %s: %w", name, ErrInjected)
}

// Hits returns how often name has fired.
func (r *Registry) Hits(name string) int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.points[name]; ok {
		return p.hits
	}
	return 0
}
