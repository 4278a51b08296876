package httpapi

import (
	"context"
	"time"
)

// The admission queue's classes and state, for the tests that drive its
// CoDel state machine with a clock of their own.
// Class is a class of requests waiting for a slot.
type Class = class

const (
	Continuing = continuing
	Initiating = initiating
)

// NewSlotQueue is newSlotQueue without metrics registered.
func NewSlotQueue(slots int, target, interval time.Duration, now func() time.Time) *slotQueue {
	return newSlotQueue(slots, target, interval, now, nil)
}

// Observe records a request of class c that waited delay.
func (q *slotQueue) Observe(c class, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.observe(c, delay)
}

// MaxWait is how long a request of class c may wait now.
func (q *slotQueue) MaxWait(c class) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.maxWait(c)
}

// Acquire takes a slot for a request of class c, waiting as the queue
// allows.
func (q *slotQueue) Acquire(ctx context.Context, c class) bool { return q.acquire(ctx, c) }

// Release gives a slot back.
func (q *slotQueue) Release() { q.release() }

// Waiting counts the requests waiting for a slot.
func (q *slotQueue) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for c := range classes {
		n += q.waiting[c].Len()
	}
	return n
}
