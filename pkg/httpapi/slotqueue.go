package httpapi

import (
	"container/list"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// class orders the requests waiting for a slot: a freed slot goes to the
// first waiting request of the lowest class.
type class int

const (
	// returning is a request coming back from a call to another service
	// (OutsideSlot): it has done part of its work and holds a place
	// outside.
	returning class = iota
	// continuing is a request continuing work already begun.
	continuing
	// initiating is a request starting new work (Server.Initiating).
	initiating
	classes
)

// slotQueue hands out a fixed number of slots and queues the requests
// that find none, shedding by queueing delay as CoDel does (Nichols and
// Jacobson, "Controlling Queue Delay", 2012), in the form Facebook gives
// it for servers: while the queue's delay has dipped below target within
// the last interval, a request may wait up to interval; once it has
// stayed above target for a whole interval, a request waits at most
// target. A burst is then served late rather than refused, and a standing
// queue is refused early rather than served late. Each class keeps its own
// state, as fq_codel keeps one per flow: the continuing requests a freed
// slot serves first wait little even while the initiating ones behind them
// form a standing queue, and their short waits must not keep the
// initiating requests waiting out the interval before each is shed.
//
// It is written here because no maintained Go library offers a CoDel queue
// with priorities in front of a fixed number of slots; the adaptive
// concurrency limiters that exist (failsafe-go's, tried) move the number of
// slots instead, which docs/decisions.md (Overload) explains was worse.
type slotQueue struct {
	target, interval time.Duration
	now              func() time.Time

	mu      sync.Mutex
	free    int
	waiting [classes]list.List // of *waiter
	// aboveSince is when a class's queueing delay last rose above target,
	// zero while it is below.
	aboveSince [classes]time.Time
	overloaded [classes]bool

	queued     prometheus.Gauge
	overloadG  prometheus.Gauge
	queueDelay prometheus.Histogram
}

// waiter is a request waiting for a slot; granted and its element are
// guarded by the queue's mutex.
type waiter struct {
	ready    chan struct{}
	enqueued time.Time
	granted  bool
	class    class
	elem     *list.Element
}

func newSlotQueue(slots int, target, interval time.Duration, now func() time.Time, reg *prometheus.Registry) *slotQueue {
	q := &slotQueue{
		target: target, interval: interval, now: now, free: slots,
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_requests_queued",
			Help: "Business requests waiting for an admission slot.",
		}),
		overloadG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_admission_overloaded",
			Help: "1 while the admission queue of a class of requests (starting new work, continuing it) has stayed above HTTP_QUEUE_WAIT for HTTP_QUEUE_INTERVAL (its requests then wait at most HTTP_QUEUE_WAIT), else 0.",
		}),
		queueDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "http_admission_queue_seconds",
			Help:    "How long business requests waited for an admission slot, shed ones included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}),
	}
	if reg != nil {
		reg.MustRegister(q.queued, q.overloadG, q.queueDelay)
	}
	return q
}

// acquire takes a slot, waiting for one as long as the queue's state
// allows or until ctx ends; false means none was taken.
func (q *slotQueue) acquire(ctx context.Context, c class) bool {
	q.mu.Lock()
	if q.free > 0 && q.empty() {
		q.free--
		q.observe(c, 0)
		q.mu.Unlock()
		return true
	}
	wait := q.maxWait(c)
	w := &waiter{ready: make(chan struct{}), enqueued: q.now(), class: c}
	w.elem = q.waiting[c].PushBack(w)
	q.queued.Inc()
	q.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.granted { // granted as the wait ended: the slot is the request's
		return true
	}
	q.waiting[c].Remove(w.elem)
	q.queued.Dec()
	q.observe(c, q.now().Sub(w.enqueued))
	return false
}

// maxWait is how long a request of class c may wait for a slot: the
// interval, or the target while the class is overloaded. The caller holds
// the mutex.
func (q *slotQueue) maxWait(c class) time.Duration {
	if q.overloaded[c] {
		return q.target
	}
	return q.interval
}

// release gives a slot back, to the first waiting request of the lowest
// class if any waits.
func (q *slotQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for c := range classes {
		front := q.waiting[c].Front()
		if front == nil {
			continue
		}
		w := q.waiting[c].Remove(front).(*waiter)
		w.granted = true
		q.queued.Dec()
		q.observe(c, q.now().Sub(w.enqueued))
		close(w.ready)
		return
	}
	q.free++
}

// observe records the queueing delay of a request of class c that got or
// gave up its slot, and moves the class's overload state as CoDel does: a
// delay under target ends it at once; one over target that has lasted an
// interval starts it.
func (q *slotQueue) observe(c class, delay time.Duration) {
	q.queueDelay.Observe(delay.Seconds())
	now := q.now()
	switch {
	case delay < q.target || q.target == 0 && delay == 0:
		q.aboveSince[c] = time.Time{}
		q.setOverloaded(c, false)
	case q.aboveSince[c].IsZero():
		q.aboveSince[c] = now
	case now.Sub(q.aboveSince[c]) >= q.interval:
		q.setOverloaded(c, true)
	}
}

// setOverloaded moves class c's state; the gauge shows whether any class
// is overloaded.
func (q *slotQueue) setOverloaded(c class, on bool) {
	q.overloaded[c] = on
	q.overloadG.Set(0)
	if slices.Contains(q.overloaded[:], true) {
		q.overloadG.Set(1)
	}
}

// empty reports whether no request waits.
func (q *slotQueue) empty() bool {
	for c := range classes {
		if q.waiting[c].Len() > 0 {
			return false
		}
	}
	return true
}
