// Package failpoint injects faults at named places in the code, so crash and
// failure windows are tested for real. It is compiled in and inert: nothing
// happens unless FAILPOINTS names a point (or an admin arms one at run time).
//
// A process declares the points it has (Config.Names), each an exported
// constant next to the code that fires it; arming a name it did not declare
// is refused with ErrUnknown, so a misspelt point fails loudly instead of
// arming nothing.
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
	"slices"
	"strconv"
	"strings"
	"sync"
)

// ErrInjected is the error an "error" fail point returns.
var ErrInjected = errors.New("injected failure")

// ErrUnknown is the error of arming a name the process did not declare.
var ErrUnknown = errors.New("unknown fail point")

// ErrBadAction is the error of arming a point with an action it does not
// have.
var ErrBadAction = errors.New("unknown action")

// Actions a point can take; ActionOff disarms it.
const (
	ActionError = "error"
	ActionExit  = "exit"
	ActionPanic = "panic"
	ActionOff   = "off"
)

// Unlimited is the count of a point that fires every time it is reached.
const Unlimited = -1

// Config is what a Registry starts from.
type Config struct {
	// Names are the points the process declares; only these can be armed
	// or fired. Duplicates are ignored.
	Names []string
	// Spec arms some of them at start (the package's spec syntax); empty
	// arms nothing.
	Spec string
}

// Point is one declared point as List shows it.
type Point struct {
	Name string `json:"name"`
	// Action is what it does when reached; ActionOff when disarmed.
	Action string `json:"action"`
	// Remaining is how many more times it fires: Unlimited (-1) for every
	// time, 0 once spent or when disarmed.
	Remaining int `json:"remaining"`
	// Hits counts how often it fired since it was last armed; disarming
	// keeps the count, so a test can disarm first and then check that its
	// fault fired.
	Hits int `json:"hits"`
}

type point struct {
	action    string
	remaining int
	hits      int
}

// Registry holds the declared points of one process and which are armed.
// A nil *Registry is inert.
type Registry struct {
	mu     sync.Mutex
	points map[string]*point
}

// New declares cfg.Names and arms what cfg.Spec says. A malformed spec, or
// one naming an undeclared point (ErrUnknown), is an error.
func New(cfg Config) (*Registry, error) {
	r := &Registry{points: make(map[string]*point, len(cfg.Names))}
	for _, name := range cfg.Names {
		if name == "" || strings.ContainsAny(name, "=,* ") {
			return nil, fmt.Errorf("fail point name %q: want a non-empty name without '=', ',', '*' or spaces", name)
		}
		r.points[name] = &point{action: ActionOff}
	}
	for _, part := range strings.Split(cfg.Spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, rest, ok := strings.Cut(part, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("fail point %q: want name=action[*count]", part)
		}
		action, countText, hasCount := strings.Cut(rest, "*")
		count := Unlimited
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

// Set arms name with action for count hits (Unlimited: every hit) and
// starts its hit count afresh; ActionOff disarms it and keeps the count.
// An undeclared name is an error wrapping ErrUnknown that lists the
// declared ones.
func (r *Registry) Set(name, action string, count int) error {
	if r == nil {
		return fmt.Errorf("fail point %q: %w (this process declares none)", name, ErrUnknown)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.points[name]
	if !ok {
		return fmt.Errorf("fail point %q: %w (known: %s)", name, ErrUnknown, r.knownLocked())
	}
	switch action {
	case ActionError, ActionExit, ActionPanic:
		p.action, p.remaining, p.hits = action, count, 0
	case ActionOff:
		p.action, p.remaining = ActionOff, 0
	default:
		return fmt.Errorf("fail point %s: %w %q (want error, exit, panic or off)", name, ErrBadAction, action)
	}
	return nil
}

// knownLocked lists the declared names, sorted; r.mu is held.
func (r *Registry) knownLocked() string {
	if len(r.points) == 0 {
		return "none"
	}
	names := make([]string, 0, len(r.points))
	for name := range r.points {
		names = append(names, name)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Inject fires name if it is armed; otherwise it returns nil.
//
// Reaching a point the process did not declare panics: it is a wiring
// mistake, like a nil map write, and no answer is safe. An error would be
// taken for the injected retryable failure and retried into a dead letter
// on every call, armed or not; nil would hide that the point can never be
// armed, so a test arming it would see nothing happen. Any test that
// passes through the point finds the mistake.
func (r *Registry) Inject(name string) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	p, ok := r.points[name]
	if !ok {
		known := r.knownLocked()
		r.mu.Unlock()
		panic(fmt.Sprintf("failpoint: %q reached but not declared (declared: %s)", name, known))
	}
	if p.action == ActionOff || p.remaining == 0 {
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

// Hits returns how often name has fired since it was last armed; 0 for a
// name that is not declared.
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

// List returns every declared point, sorted by name.
func (r *Registry) List() []Point {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Point, 0, len(r.points))
	for name, p := range r.points {
		action := p.action
		if p.remaining == 0 {
			action = ActionOff
		}
		out = append(out, Point{Name: name, Action: action, Remaining: p.remaining, Hits: p.hits})
	}
	slices.SortFunc(out, func(a, b Point) int { return strings.Compare(a.Name, b.Name) })
	return out
}
