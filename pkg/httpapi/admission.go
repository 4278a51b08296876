package httpapi

import (
	"errors"
	"fmt"
	"net/http"
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
	// DefaultQueueWait is short: a slot frees within a transaction's time
	// when the service is busy but not overloaded, and a wait much longer
	// than that only turns an immediate 503 into a slow one.
	DefaultQueueWait = 10 * time.Millisecond
	// MaxQueueWait bounds HTTP_QUEUE_WAIT: the point of shedding is an
	// answer in tens of milliseconds, not seconds.
	MaxQueueWait = time.Second
	// ShedRetryAfter is the Retry-After of a shed request.
	ShedRetryAfter = time.Second
	// InFlightPerConn is how many business requests a service admits per
	// database connection when HTTP_MAX_IN_FLIGHT is unset: one using the
	// connection and one waiting for it, so a request waits for at most
	// about one transaction, never for a queue of them.
	InFlightPerConn = 2
)

// Admission bounds the business requests a server works on at once. A
// request past MaxInFlight waits up to QueueWait for a slot and is
// otherwise answered at once with 503 OVERLOADED and Retry-After, before
// its handler runs: a request is shed whole or served whole, never cut
// off in a transaction. Health, readiness, metrics, /admin and the routes
// given to Server.Exempt are never shed.
type Admission struct {
	// MaxInFlight (HTTP_MAX_IN_FLIGHT) is the most business requests
	// served at once; 0 leaves them unbounded.
	MaxInFlight int
	// QueueWait (HTTP_QUEUE_WAIT) is how long a request may wait for a
	// slot.
	QueueWait time.Duration
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
	return errors.Join(errs...)
}

// admission is the server's limiter: a semaphore of MaxInFlight slots.
type admission struct {
	slots  chan struct{}
	wait   time.Duration
	exempt map[string]bool
	shed   *prometheus.CounterVec
	// inFlight counts the business requests being served.
	inFlight prometheus.Gauge
}

func newAdmission(a Admission, reg *prometheus.Registry) *admission {
	ad := &admission{
		wait:   a.QueueWait,
		exempt: map[string]bool{},
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_shed_total",
			Help: "Business requests answered 503 OVERLOADED at admission, by method and route.",
		}, []string{"method", "route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_requests_in_flight",
			Help: "Business requests being served (at most HTTP_MAX_IN_FLIGHT).",
		}),
	}
	if a.MaxInFlight > 0 {
		ad.slots = make(chan struct{}, a.MaxInFlight)
	}
	if reg != nil {
		reg.MustRegister(ad.shed, ad.inFlight)
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
		if operational(c.Request().URL.Path) || a.exempt[routeKey(method, route)] {
			return next(c)
		}
		if a.slots != nil {
			if !a.acquire() {
				a.shed.WithLabelValues(method, route).Inc()
				return &Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeOverloaded,
					Message: "the service is at its capacity, try again after Retry-After", RetryAfter: ShedRetryAfter}
			}
			defer func() { <-a.slots }()
		}
		a.inFlight.Inc()
		defer a.inFlight.Dec()
		return next(c)
	}
}

// acquire takes a slot, waiting up to the queue wait for one.
func (a *admission) acquire() bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	if a.wait <= 0 {
		return false
	}
	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	select {
	case a.slots <- struct{}{}:
		return true
	case <-timer.C:
		return false
	}
}

// Exempt admits the route method path (as registered, e.g.
// "/payments/callback") without bounds: a route that completes work the
// service already accepted, whose sender bounds its own concurrency and
// retries, such as a payment callback. Call it before the server runs.
func (s *Server) Exempt(method, path string) {
	s.admission.exempt[routeKey(method, path)] = true
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1: the
// header carries no fraction.
func retryAfterSeconds(d time.Duration) string {
	return fmt.Sprint(max(1, int64((d+time.Second-1)/time.Second)))
}
