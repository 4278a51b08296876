// Package poll waits for a condition by polling it with a deadline, the
// only way tests here wait for asynchronous effects (never a bare sleep).
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until re-checks its condition.
const Interval = 20 * time.Millisecond

// Until polls cond until it returns true, failing the test after timeout.
// what names the condition in the failure message.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			tb.Fatalf("%s: not reached within %v", what, timeout)
		case <-tick.C:
		}
	}
}
