package httpapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// CodeOverloaded answers a request shed because the service is at its
// capacity: nothing of it ran, so the client may send it again after
// Retry-After.
const CodeOverloaded = "OVERLOADED"

// Defaults of Admission (README.md, Configuration).
const (
	// DefaultQueueWait is the queueing delay a busy service tolerates
	// (CoDel's target): a slot frees within a transaction's time when the
	// service is busy but not overloaded, so a queue that never gets
	// shorter than this is a standing queue, and once overloaded a request
	// waits no longer than this before it is shed.
	DefaultQueueWait = 10 * time.Millisecond
	// DefaultQueueInterval is how long the queue may stay above
	// QueueWait before the service counts itself overloaded (CoDel's
	// interval, and its default), and the longest a request waits while
	// it is not: a burst is queued and served, a standing queue is shed.
	DefaultQueueInterval = 100 * time.Millisecond
	// MaxQueueWait bounds HTTP_QUEUE_WAIT and HTTP_QUEUE_INTERVAL: the
	// point of shedding is an answer in tens of milliseconds, not seconds.
	MaxQueueWait = time.Second
	// ShedRetryAfter is the Retry-After of a shed request.
	ShedRetryAfter = time.Second
	// InFlightPerConn is how many business requests a service admits per
	// database connection when HTTP_MAX_IN_FLIGHT is unset: one using the
	// connection and one waiting for it, so an admitted request waits for
	// at most about one transaction, never for a queue of them.
	InFlightPerConn = 2
	// InFlightPerCPU is how many business requests a service admits per
	// core when HTTP_MAX_IN_FLIGHT is unset. The queue in front of the
	// slots, not the slots, is what sheds (docs/decisions.md, Overload):
	// the slots only have to be enough to keep the cores and the database
	// busy while requests wait on commits and on each other, and few
	// enough that the requests sharing the cores each still finish in
	// about a transaction's time.
	InFlightPerCPU = 8
)

// DefaultMaxInFlight is the MaxInFlight of a service whose database pool
// holds poolSize connections and HTTP_MAX_IN_FLIGHT is unset: the fewer of
// InFlightPerConn per connection and InFlightPerCPU per core the Go
// runtime may use.
func DefaultMaxInFlight(poolSize int) int {
	return min(InFlightPerConn*poolSize, InFlightPerCPU*runtime.GOMAXPROCS(0))
}

// Admission bounds the business requests a server works on at once and
// sheds by queueing delay, as CoDel does for a router's packets and
// Facebook's servers do for requests ("Fail at Scale", controlled delay).
// A request past MaxInFlight waits in a queue; while the queue empties now
// and then (a burst), it may wait up to QueueInterval; once every request
// of the last QueueInterval waited longer than QueueWait (a standing
// queue: the service is overloaded), it waits at most QueueWait. A request
// that gets no slot in its wait is answered 503 OVERLOADED with
// Retry-After, before its handler runs: a request is shed whole or served
// whole, never cut off in a transaction. A freed slot goes first to a
// request continuing work already begun, then to one starting new work
// (Server.Initiating). Health, readiness, metrics, /admin and the routes
// given to Server.Exempt are never shed.
type Admission struct {
	// MaxInFlight (HTTP_MAX_IN_FLIGHT) is the most business requests
	// served at once; 0 leaves them unbounded.
	MaxInFlight int
	// QueueWait (HTTP_QUEUE_WAIT) is the queueing delay that marks a
	// standing queue, and the longest wait while overloaded.
	QueueWait time.Duration
	// QueueInterval (HTTP_QUEUE_INTERVAL) is how long a standing queue
	// lasts before the service counts itself overloaded, and the longest
	// wait while it is not; 0 is QueueWait (a queue that waits no longer
	// than QueueWait at any time).
	QueueInterval time.Duration
}

// Validate reports every unusable setting, naming its variable.
func (a Admission) Validate() error {
	var errs []error
	if a.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("HTTP_MAX_IN_FLIGHT=%d: want 0 (the default) or more", a.MaxInFlight))
	}
	if a.QueueWait < 0 || a.QueueWait > MaxQueueWait {
		errs = append(errs, fmt.Errorf("HTTP_QUEUE_WAIT=%s: want 0 to %s", a.QueueWait, MaxQueueWait))
	}
	if a.QueueInterval != 0 && (a.QueueInterval < a.QueueWait || a.QueueInterval > MaxQueueWait) {
		errs = append(errs, fmt.Errorf("HTTP_QUEUE_INTERVAL=%s: want HTTP_QUEUE_WAIT (%s) to %s", a.QueueInterval, a.QueueWait, MaxQueueWait))
	}
	return errors.Join(errs...)
}

// admission is the server's limiter: a queue of MaxInFlight slots, and a
// semaphore of outsidePerSlot times as many places for admitted requests
// that gave their slot back while they wait on another service
// (OutsideSlot).
type admission struct {
	slots   *slotQueue
	outside chan struct{}
	wait    time.Duration
	exempt  map[string]bool
	// initiating are the routes that start new work.
	initiating map[string]bool
	shed       *prometheus.CounterVec
	// inFlight counts the business requests being served.
	inFlight prometheus.Gauge
}

func newAdmission(a Admission, reg *prometheus.Registry) *admission {
	ad := &admission{
		wait:       a.QueueWait,
		exempt:     map[string]bool{},
		initiating: map[string]bool{},
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_shed_total",
			Help: "Business requests answered 503 OVERLOADED at admission, by method and route.",
		}, []string{"method", "route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_requests_in_flight",
			Help: "Business requests being served (at most HTTP_MAX_IN_FLIGHT).",
		}),
	}
	if reg != nil {
		reg.MustRegister(ad.shed, ad.inFlight)
	}
	if a.MaxInFlight > 0 {
		ad.slots = newSlotQueue(a.MaxInFlight, a.QueueWait, cmp.Or(a.QueueInterval, a.QueueWait), time.Now, reg)
		ad.outside = make(chan struct{}, outsidePerSlot*a.MaxInFlight)
	}
	return ad
}

// routeKey names a route as Echo matched it.
func routeKey(method, path string) string { return method + " " + path }

// operational reports whether path serves operators and probes, which must
// answer while the service is overloaded: that is when they are needed.
func operational(path string) bool {
	switch path {
	case "/healthz", "/readyz", "/metrics", "/admin":
		return true
	}
	return strings.HasPrefix(path, "/admin/")
}

// middleware admits a business request or sheds it.
func (a *admission) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		method, route := c.Request().Method, c.Path()
		key := routeKey(method, route)
		if operational(c.Request().URL.Path) || a.exempt[key] {
			return next(c)
		}
		if a.slots != nil {
			class := continuing
			if a.initiating[key] {
				class = initiating
			}
			req := c.Request()
			if !a.slots.acquire(req.Context(), class) {
				return a.refuse(method, route)
			}
			t := &ticket{a: a, method: method, route: route, held: true}
			c.SetRequest(req.WithContext(context.WithValue(req.Context(), ticketKey{}, t)))
			defer t.done()
		}
		a.inFlight.Inc()
		defer a.inFlight.Dec()
		return next(c)
	}
}

// refuse counts a request of method and route as shed and returns its
// answer.
func (a *admission) refuse(method, route string) *Error {
	a.shed.WithLabelValues(method, route).Inc()
	return &Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeOverloaded,
		Message: "the service is at its capacity, try again after Retry-After", RetryAfter: ShedRetryAfter}
}

// place takes a place of sem, waiting until deadline for one.
func place(sem chan struct{}, deadline time.Time) bool {
	select {
	case sem <- struct{}{}:
		return true
	default:
	}
	wait := time.Until(deadline)
	if wait <= 0 {
		return false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case sem <- struct{}{}:
		return true
	case <-timer.C:
		return false
	}
}

// outsidePerSlot is how many requests may wait on another service
// (OutsideSlot) per slot. By Little's law the requests waiting on a peer
// number the rate times the peer's answer time, and the slots the rate
// times a request's own work: a peer's answer (its own admission and
// transaction and two hops) takes about as long as the work of the
// request waiting for it, and twice as many leaves room for a peer
// slower than that before its callers shed.
const outsidePerSlot = 2

// ticketKey is the context key of an admitted request's ticket.
type ticketKey struct{}

// ticket is an admitted request's slot. Only the request's own goroutine
// touches it.
type ticket struct {
	a             *admission
	method, route string
	held          bool
}

// done gives the slot back when the request ends.
func (t *ticket) done() {
	if t.held {
		t.a.slots.release()
	}
}

// OutsideSlot runs wait, a handler's call to another service, with the
// request's admission slot given back, and takes a slot again before it
// returns. A slot stands for about one transaction's use of the database
// (InFlightPerConn); a request holding it while another service answers
// would leave the pool idle and shed requests it could serve (the payment
// service's order look-up). The requests waiting outside their slot are
// bounded too, by twice as many places as there are slots, taken like a
// slot. Coming back, it takes the first slot freed, before any request
// that has not started.
// OutsideSlot returns wait's error, or a 503 OVERLOADED *Error, counted as
// shed, when no place or no slot frees within the queue wait: call it
// before the handler writes, so a request shed here has written nothing.
// Outside an admitted request (an exempt route, an unbounded server) it
// only runs wait.
func OutsideSlot(ctx context.Context, wait func() error) error {
	t, ok := ctx.Value(ticketKey{}).(*ticket)
	if !ok || !t.held {
		return wait()
	}
	a := t.a
	if !place(a.outside, time.Now().Add(a.wait)) {
		return a.refuse(t.method, t.route)
	}
	a.slots.release()
	t.held = false
	err := wait()
	<-a.outside
	if !a.slots.acquire(ctx, returning) {
		return a.refuse(t.method, t.route)
	}
	t.held = true
	return err
}

// Exempt admits the route method path (as registered, e.g.
// "/payments/callback") without bounds: a route that completes work the
// service already accepted, whose sender bounds its own concurrency and
// retries, such as a payment callback. Call it before the server runs.
func (s *Server) Exempt(method, path string) {
	s.admission.exempt[routeKey(method, path)] = true
}

// Initiating marks the route method path (as registered, e.g. "/orders")
// as one that starts new work, such as creating an order: a freed slot
// goes to its requests only when no request continuing work already begun
// (an order's checkout, its payment's look-up) waits for one. Past the
// capacity the server then sheds new work before the next steps of work
// it has started: a created order whose checkout or payment is shed has
// cost its create for nothing. Call it before the server runs.
func (s *Server) Initiating(method, path string) {
	s.admission.initiating[routeKey(method, path)] = true
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1: the
// header carries no fraction.
func retryAfterSeconds(d time.Duration) string {
	return fmt.Sprint(max(1, int64((d+time.Second-1)/time.Second)))
}
