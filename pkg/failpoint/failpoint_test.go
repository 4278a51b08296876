package failpoint_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
)

var names = []string{"inventory.apply", "relay.before-publish", "relay.after-publish"}

func TestNew(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		spec  string
		// unknown: the error wraps ErrUnknown; ok: no error at all.
		ok, unknown bool
	}{
		{"empty spec", names, "", true, false},
		{"one point", names, "inventory.apply=error", true, false},
		{"two points with a count", names, "inventory.apply=error*2, relay.after-publish=exit", true, false},
		{"off at start", names, "inventory.apply=off", true, false},
		{"no action", names, "inventory.apply", false, false},
		{"unknown action", names, "inventory.apply=boom", false, false},
		{"zero count", names, "inventory.apply=error*0", false, false},
		{"count not a number", names, "inventory.apply=error*x", false, false},
		{"misspelt name", names, "inventory.aply=error", false, true},
		{"undeclared among declared", names, "inventory.apply=error,payment.apply=error", false, true},
		{"nothing declared", nil, "inventory.apply=error", false, true},
		{"nothing declared, nothing armed", nil, "", true, false},
		{"empty declared name", []string{""}, "", false, false},
		{"declared name with a separator", []string{"a=b"}, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := failpoint.New(failpoint.Config{Names: tt.names, Spec: tt.spec})
			if (err == nil) != tt.ok {
				t.Fatalf("New = %v, want ok=%v", err, tt.ok)
			}
			if errors.Is(err, failpoint.ErrUnknown) != tt.unknown {
				t.Fatalf("New = %v, want ErrUnknown=%v", err, tt.unknown)
			}
			if tt.unknown && tt.names != nil && !strings.Contains(err.Error(), "known: inventory.apply, relay.after-publish, relay.before-publish") {
				t.Errorf("error %q does not list the declared points", err)
			}
		})
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name, point, action    string
		unknown, badAction, ok bool
	}{
		{"arm declared", "inventory.apply", failpoint.ActionError, false, false, true},
		{"disarm declared", "inventory.apply", failpoint.ActionOff, false, false, true},
		{"arm undeclared", "inventory.aply", failpoint.ActionError, true, false, false},
		{"disarm undeclared", "inventory.aply", failpoint.ActionOff, true, false, false},
		{"bad action", "inventory.apply", "explode", false, true, false},
		{"bad action on an undeclared name", "inventory.aply", "explode", true, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := failpoint.New(failpoint.Config{Names: names})
			if err != nil {
				t.Fatal(err)
			}
			err = r.Set(tt.point, tt.action, failpoint.Unlimited)
			if (err == nil) != tt.ok || errors.Is(err, failpoint.ErrUnknown) != tt.unknown || errors.Is(err, failpoint.ErrBadAction) != tt.badAction {
				t.Fatalf("Set = %v, want ok=%v unknown=%v badAction=%v", err, tt.ok, tt.unknown, tt.badAction)
			}
			if tt.unknown && !strings.Contains(err.Error(), "inventory.apply, relay.after-publish, relay.before-publish") {
				t.Errorf("error %q does not list the declared points", err)
			}
		})
	}
}

func TestInjectCountsHits(t *testing.T) {
	r, err := failpoint.New(failpoint.Config{Names: names, Spec: "inventory.apply=error*2"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		got := r.Inject("inventory.apply")
		if (got != nil) != want || (got != nil && !errors.Is(got, failpoint.ErrInjected)) {
			t.Fatalf("hit %d: %v, want failure=%v", i, got, want)
		}
	}
	if err := r.Inject("relay.before-publish"); err != nil {
		t.Fatalf("a declared point that is not armed fired: %v", err)
	}
	if got := r.Hits("inventory.apply"); got != 2 {
		t.Fatalf("hits = %d, want 2 (the third reach found it spent)", got)
	}
	if got := r.Hits("relay.before-publish"); got != 0 {
		t.Fatalf("hits of a disarmed point = %d", got)
	}

	// Disarming keeps the count; arming again starts it afresh.
	if err := r.Set("inventory.apply", failpoint.ActionOff, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.Hits("inventory.apply"); got != 2 {
		t.Fatalf("hits after off = %d, want 2", got)
	}
	if err := r.Set("inventory.apply", failpoint.ActionError, failpoint.Unlimited); err != nil {
		t.Fatal(err)
	}
	if got := r.Hits("inventory.apply"); got != 0 {
		t.Fatalf("hits after arming again = %d, want 0", got)
	}
	for range 5 {
		if !errors.Is(r.Inject("inventory.apply"), failpoint.ErrInjected) {
			t.Fatal("an unlimited point did not fire")
		}
	}
	if got := r.Hits("inventory.apply"); got != 5 {
		t.Fatalf("hits = %d, want 5", got)
	}

	var inert *failpoint.Registry
	if inert.Inject("x") != nil || inert.Hits("x") != 0 || inert.List() != nil {
		t.Fatal("a nil registry is not inert")
	}
}

func TestInjectUndeclaredPanics(t *testing.T) {
	r, err := failpoint.New(failpoint.Config{Names: names})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(p.(string), `"inventory.aply" reached but not declared`) {
			t.Fatalf("recovered %v, want the undeclared point named", p)
		}
	}()
	_ = r.Inject("inventory.aply")
}

func TestList(t *testing.T) {
	tests := []struct {
		name   string
		spec   string
		inject map[string]int
		want   []failpoint.Point
	}{
		{"nothing armed", "", nil, []failpoint.Point{
			{Name: "inventory.apply", Action: "off"},
			{Name: "relay.after-publish", Action: "off"},
			{Name: "relay.before-publish", Action: "off"},
		}},
		{"armed, partly spent", "inventory.apply=error*3,relay.before-publish=error", map[string]int{"inventory.apply": 1, "relay.before-publish": 4}, []failpoint.Point{
			{Name: "inventory.apply", Action: "error", Remaining: 2, Hits: 1},
			{Name: "relay.after-publish", Action: "off"},
			{Name: "relay.before-publish", Action: "error", Remaining: failpoint.Unlimited, Hits: 4},
		}},
		{"spent shows off with its hits", "inventory.apply=error*2", map[string]int{"inventory.apply": 3}, []failpoint.Point{
			{Name: "inventory.apply", Action: "off", Remaining: 0, Hits: 2},
			{Name: "relay.after-publish", Action: "off"},
			{Name: "relay.before-publish", Action: "off"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := failpoint.New(failpoint.Config{Names: append(names, "inventory.apply"), Spec: tt.spec})
			if err != nil {
				t.Fatal(err)
			}
			for name, n := range tt.inject {
				for range n {
					_ = r.Inject(name)
				}
			}
			if got := r.List(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("List = %+v\nwant   %+v", got, tt.want)
			}
		})
	}
}
