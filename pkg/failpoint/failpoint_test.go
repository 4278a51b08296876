package failpoint_test

import (
	"errors"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		ok   bool
	}{
		{"", true},
		{"a=error", true},
		{"a=error*2, b=exit", true},
		{"a", false},
		{"a=boom", false},
		{"a=error*0", false},
		{"a=error*x", false},
	}
	for _, tt := range tests {
		if _, err := failpoint.Parse(tt.spec); (err == nil) != tt.ok {
			t.Errorf("Parse(%q) = %v, want ok=%v", tt.spec, err, tt.ok)
		}
	}
}

func TestInjectCountsDown(t *testing.T) {
	r, err := failpoint.Parse("inventory.apply=error*2")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		got := r.Inject("inventory.apply")
		if (got != nil) != want || (got != nil && !errors.Is(got, failpoint.ErrInjected)) {
			t.Fatalf("hit %d: %v, want failure=%v", i, got, want)
		}
	}
	if r.Hits("inventory.apply") != 2 {
		t.Fatalf("hits = %d", r.Hits("inventory.apply"))
	}
	var inert *failpoint.Registry
	if inert.Inject("x") != nil {
		t.Fatal("nil registry fired")
	}
}
