package envconfig_test

import (
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

func TestReader(t *testing.T) {
	env := map[string]string{"N": "7", "D": "250ms", "L": "a, b,,c", "BAD_N": "x", "BAD_D": "5"}
	r := envconfig.New(func(k string) string { return env[k] })

	if got := r.Int("N", 1); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := r.Duration("D", time.Second); got != 250*time.Millisecond {
		t.Errorf("Duration = %v", got)
	}
	if got := r.List("L", nil); len(got) != 3 || got[2] != "c" {
		t.Errorf("List = %q", got)
	}
	if got := r.String("MISSING", "def"); got != "def" {
		t.Errorf("String default = %q", got)
	}
	if r.Err() != nil {
		t.Fatalf("unexpected error %v", r.Err())
	}
	r.Int("BAD_N", 1)
	r.Duration("BAD_D", time.Second)
	if err := r.Err(); err == nil {
		t.Fatal("malformed values not reported")
	}
}
