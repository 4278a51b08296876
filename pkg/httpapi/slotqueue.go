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
// A request that finds so many of its class ahead of it that, at the pace
// freed slots have been going to its class, it could not get one within
// its wait is shed at once rather than at the end of that wait: it would
// be shed all the same, and a client told in a millisecond can try again
// sooner than one told after the interval. The pace is measured per class
// and only while the class's requests wait, so the requests served before
// them are in it and an idle service's pauses are not.
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
	// lastHandover is when a freed slot last went to a waiting request of
	// a class, or when its queue formed, zero while none of it waits;
	// handoverGap is the moving mean of the gaps between them, zero until
	// one is measured.
	lastHandover [classes]time.Time
	handoverGap  [classes]time.Duration

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
	if expected := q.expectedWait(c); expected > wait {
		q.queueDelay.Observe(0)
		q.setState(c, expected)
		q.mu.Unlock()
		return false
	}
	w := &waiter{ready: make(chan struct{}), enqueued: q.now(), class: c}
	if q.waiting[c].Len() == 0 {
		q.lastHandover[c] = w.enqueued
	}
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
	q.remove(w)
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

// expectedWait is how long a request of class c arriving now would wait
// for a slot if they keep going to its class at the measured pace: a gap
// for each request of the class waiting and one for itself; 0 while no
// pace is measured. The caller holds the mutex.
func (q *slotQueue) expectedWait(c class) time.Duration {
	return time.Duration(q.waiting[c].Len()+1) * q.handoverGap[c]
}

// remove takes w out of its class's queue; the class's pace is measured
// again from the next time its queue forms. The caller holds the mutex.
func (q *slotQueue) remove(w *waiter) {
	q.waiting[w.class].Remove(w.elem)
	q.queued.Dec()
	if q.waiting[w.class].Len() == 0 {
		q.lastHandover[w.class] = time.Time{}
	}
}

// handoverGapWeight is the weight of the newest gap in handoverGap's
// moving mean: slots free hundreds of times a second under load, so the
// mean follows a change of pace within a few tens of milliseconds and is
// not moved much by one slow request.
const handoverGapWeight = 8

// release gives a slot back, to the first waiting request of the lowest
// class if any waits.
func (q *slotQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for c := range classes {
		front := q.waiting[c].Front()
		if front == nil {
			continue
		}
		w := front.Value.(*waiter)
		w.granted = true
		gap := now.Sub(q.lastHandover[c])
		if q.handoverGap[c] == 0 {
			q.handoverGap[c] = gap
		} else {
			q.handoverGap[c] += (gap - q.handoverGap[c]) / handoverGapWeight
		}
		q.lastHandover[c] = now
		q.remove(w)
		q.observe(c, now.Sub(w.enqueued))
		close(w.ready)
		return
	}
	q.free++
}

// observe records the queueing delay of a request of class c that got or
// gave up its slot, and moves the class's overload state by it.
func (q *slotQueue) observe(c class, delay time.Duration) {
	q.queueDelay.Observe(delay.Seconds())
	q.setState(c, delay)
}

// setState moves class c's overload state by a queueing delay, observed
// or expected, as CoDel does: a delay under target ends it at once; one
// over target that has lasted an interval starts it. The caller holds the
// mutex.
func (q *slotQueue) setState(c class, delay time.Duration) {
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
