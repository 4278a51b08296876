// Package backoff computes the waits between attempts that the producer side
// (the outbox relay) and the consumer side (the router's retry) share, so a
// row and a message back off by the same rule.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jittered is the delay before attempt n+1 after n failures: exponential
// from initial, capped at maxDelay, with ±50 % jitter so that many rows or
// messages failing together do not retry in lock step. It is stateless, so
// the relay can compute it from a row's attempt count alone; a stateful
// backoff object (cenkalti/backoff's) would have to live per row.
func Jittered(failures int, initial, maxDelay time.Duration) time.Duration {
	d := initial
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	jitter := 0.5 + rand.Float64() // [0.5, 1.5)
	return time.Duration(float64(d) * jitter)
}
