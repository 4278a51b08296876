// Package httpapi builds the Echo server every service uses: JSON errors of
// the form {"businessCode": "...", "message": "..."} mapped from errors in
// one place (a value breaking a rule of pkg/event is a 400 everywhere), a
// 1 MiB body limit (413 above it), one strict JSON decoder, changes
// accepted only as JSON and from the service's own origin (415, 403; on
// loopback only to a loopback Host), read, write and
// idle timeouts, an admission limit that sheds business requests past the
// service's capacity at once (503 OVERLOADED with Retry-After),
// bearer-token admin routes, health, readiness and Prometheus metrics,
// and a graceful shutdown.
package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// Business codes shared by every service.
const (
	CodeSuccess        = "SUCCESS"
	CodeInvalidRequest = "INVALID_REQUEST"
	CodeNotFound       = "NOT_FOUND"
	CodeUnauthorized   = "UNAUTHORIZED"
	CodeTooLarge       = "PAYLOAD_TOO_LARGE"
	CodeInternal       = "INTERNAL_ERROR"
	CodeUnavailable    = "UNAVAILABLE"
)

// Error is an error with the HTTP status and business code it answers with.
type Error struct {
	Status       int
	BusinessCode string
	Message      string
	Err          error
	// RetryAfter, when positive, is sent as the Retry-After header (whole
	// seconds, rounded up): when a client may try a 503 again.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// BadRequest is a 400 with INVALID_REQUEST.
func BadRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, BusinessCode: CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// NotFound is a 404 with NOT_FOUND.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, BusinessCode: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	BusinessCode string `json:"businessCode"`
	Message      string `json:"message"`
}

// Config configures the server.
type Config struct {
	Addr       string
	AdminToken string
	// Ready reports whether the service can serve (database reachable, ...).
	Ready func(ctx context.Context) error
	// Registry is served on /metrics.
	Registry *prometheus.Registry
	// MapError turns a service's own errors into *Error; nil means none.
	MapError func(error) *Error
	// Profiling serves Go's profiles under /admin/debug/pprof/
	// (PPROF_ENABLED); off, those paths answer 404.
	Profiling bool
	// Timeouts bound how long one connection may hold the server; zero
	// fields take DefaultTimeouts'.
	Timeouts Timeouts
	// Admission bounds the business requests served at once; the zero
	// value bounds none.
	Admission Admission
	// LoopbackHostOnly refuses a request whose Host is not a loopback
	// name or address (403 FORBIDDEN_HOST): set for a development service
	// listening on loopback, whose routes have no credentials, against
	// DNS rebinding. Every server refuses a change from a foreign Origin
	// or with a body that is not JSON (guardOrigin).
	LoopbackHostOnly bool
	// Tracing records a span of each request but the probes' and scrapes'
	// (traceRequests); nil records none.
	Tracing trace.TracerProvider
}

// Timeouts bound a connection's request, answer and idleness, so a client
// sending or reading a byte a second cannot hold a connection (and its
// goroutine) for days.
type Timeouts struct {
	// ReadHeader bounds reading a request's headers.
	ReadHeader time.Duration
	// Read bounds reading a whole request, body included.
	Read time.Duration
	// Write bounds a request from the end of its headers to the end of
	// its answer. The profiling endpoints extend it by the time they
	// profile for.
	Write time.Duration
	// Idle bounds how long a kept-alive connection waits for its next
	// request.
	Idle time.Duration
}

// DefaultTimeouts are the servers' timeouts (README.md, API): a request
// carries at most 1 MiB, and no handler waits longer than its database's
// statement timeout or its peers' client timeouts.
func DefaultTimeouts() Timeouts {
	return Timeouts{ReadHeader: 5 * time.Second, Read: 15 * time.Second, Write: 45 * time.Second, Idle: 2 * time.Minute}
}

// withDefaults fills t's zero fields from DefaultTimeouts.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.ReadHeader, &d.ReadHeader}, {&t.Read, &d.Read}, {&t.Write, &d.Write}, {&t.Idle, &d.Idle},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// MaxProfileSeconds is the longest profile or trace the profiling
// endpoints take: the write timeout is extended by that much only there.
const MaxProfileSeconds = 60

// Server is an Echo server with the suite's conventions.
type Server struct {
	Echo      *echo.Echo
	cfg       Config
	logger    *slog.Logger
	admission *admission
}

// New returns a server with health, readiness and metrics registered.
func New(cfg Config, logger *slog.Logger) *Server {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{Echo: e, cfg: cfg, logger: logger, admission: newAdmission(cfg.Admission, cfg.Registry)}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", MaxBodyBytes)))
	e.Use(middleware.Recover())
	// Before admission, so a shed request shows in its trace too.
	if cfg.Tracing != nil {
		e.Use(traceRequests(cfg.Tracing))
	}
	// First after recovery, so a shed request costs no body read, no
	// id check and no handler.
	e.Use(s.admission.middleware)
	e.Use(guardOrigin(cfg.LoopbackHostOnly))
	e.Use(checkIDs)
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		if cfg.Ready != nil {
			if err := cfg.Ready(c.Request().Context()); err != nil {
				return &Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeUnavailable, Message: "not ready", Err: err}
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
	if cfg.Registry != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{Registry: cfg.Registry})))
	}
	if cfg.Profiling {
		s.registerProfiling()
	}
	return s
}

// idParams are the path and query parameters that carry an id of the
// contract (pkg/event/rules.go): an order, customer, SKU or event id, or a
// dead letter's or run's number.
var idParams = []string{"id", "orderId", "customerId", "sku", "eventId", "aggregateId"}

// checkIDs refuses, before any handler runs, a request whose id in the
// path or query breaks the contract's id rule: such an id cannot name
// anything, and asking a database or another service about a megabyte of
// it only costs them (400 naming the parameter).
func checkIDs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for _, name := range idParams {
			if v := c.Param(name); v != "" {
				if err := rules.ValidateID(name, v); err != nil {
					return err
				}
			}
			if v, ok := c.QueryParams()[name]; ok {
				for _, one := range v {
					if one == "" { // an empty filter filters nothing
						continue
					}
					if err := rules.ValidateID(name, one); err != nil {
						return err
					}
				}
			}
		}
		return next(c)
	}
}

// registerProfiling serves Go's profiles under /admin/debug/pprof/, behind
// the admin token, so a slow drill can be profiled where it runs:
// go tool pprof http://127.0.0.1:8083/admin/debug/pprof/profile?seconds=10.
// (Importing net/http/pprof also registers on http.DefaultServeMux, which
// no service serves.)
func (s *Server) registerProfiling() {
	g := s.Admin()
	g.GET("/debug/pprof/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	g.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	g.GET("/debug/pprof/profile", s.timed(30, pprof.Profile))
	g.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
	g.GET("/debug/pprof/trace", s.timed(1, pprof.Trace))
	g.GET("/debug/pprof/:name", func(c echo.Context) error {
		pprof.Handler(c.Param("name")).ServeHTTP(c.Response(), c.Request())
		return nil
	})
}

// timed serves a profile that runs for its seconds parameter (def when
// absent): at most MaxProfileSeconds, with the write timeout extended by
// that long for this request only, so the server's short write timeout
// neither cuts the profile nor is lifted for every route.
func (s *Server) timed(def int, h http.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		secs := def
		if v := c.QueryParam("seconds"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxProfileSeconds {
				return BadRequest("seconds=%q: want 1-%d", v, MaxProfileSeconds)
			}
			secs = n
		}
		deadline := time.Now().Add(time.Duration(secs)*time.Second + s.cfg.Timeouts.withDefaults().Write)
		if err := http.NewResponseController(c.Response().Writer).SetWriteDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return fmt.Errorf("extend write deadline: %w", err)
		}
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

// Admin returns the /admin group, guarded by the admin token when one is set.
func (s *Server) Admin() *echo.Group {
	g := s.Echo.Group("/admin")
	if s.cfg.AdminToken != "" {
		want := []byte("Bearer " + s.cfg.AdminToken)
		g.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				got := []byte(c.Request().Header.Get(echo.HeaderAuthorization))
				if subtle.ConstantTimeCompare(got, want) != 1 {
					return &Error{Status: http.StatusUnauthorized, BusinessCode: CodeUnauthorized, Message: "admin token required"}
				}
				return next(c)
			}
		})
	}
	return g
}

// handleError is the one place errors become HTTP answers.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var apiErr *Error
	var httpErr *echo.HTTPError
	var ruleErr *rules.RuleError
	switch {
	case errors.As(err, &apiErr):
	case errors.As(err, &ruleErr):
		// A value that breaks a rule of the contract is the client's to
		// fix, in every service alike.
		apiErr = BadRequest("%s", ruleErr.Error())
	case s.cfg.MapError != nil && s.cfg.MapError(err) != nil:
		apiErr = s.cfg.MapError(err)
	case errors.As(err, &httpErr):
		apiErr = fromEcho(httpErr)
	default:
		apiErr = &Error{Status: http.StatusInternalServerError, BusinessCode: CodeInternal, Message: "internal error", Err: err}
	}
	// A shed request is counted, not logged: under overload a log line
	// each would add work exactly when there is none to spare.
	if apiErr.Status >= 500 && apiErr.BusinessCode != CodeOverloaded {
		s.logger.ErrorContext(c.Request().Context(), "request failed",
			"method", c.Request().Method, "path", c.Path(), "error", err)
	}
	msg := apiErr.Message
	if apiErr.Status < 500 && apiErr.Err != nil {
		msg = apiErr.Error()
	}
	if apiErr.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", retryAfterSeconds(apiErr.RetryAfter))
	}
	if err := c.JSON(apiErr.Status, ErrorBody{BusinessCode: apiErr.BusinessCode, Message: msg}); err != nil {
		s.logger.WarnContext(c.Request().Context(), "write error answer", "error", err)
	}
}

func fromEcho(e *echo.HTTPError) *Error {
	msg := fmt.Sprint(e.Message)
	switch e.Code {
	case http.StatusRequestEntityTooLarge:
		return &Error{Status: e.Code, BusinessCode: CodeTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes)}
	case http.StatusNotFound:
		return &Error{Status: e.Code, BusinessCode: CodeNotFound, Message: msg}
	case http.StatusMethodNotAllowed:
		return &Error{Status: e.Code, BusinessCode: CodeInvalidRequest, Message: msg}
	}
	if e.Code >= 400 && e.Code < 500 {
		return &Error{Status: e.Code, BusinessCode: CodeInvalidRequest, Message: msg}
	}
	return &Error{Status: e.Code, BusinessCode: CodeInternal, Message: msg}
}

// Bind decodes the JSON body into v with Decode. A body over MaxBodyBytes
// answers 413.
func Bind(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return Decode(body, v)
}

// BindOptional is Bind for an endpoint whose body may be left out: an
// empty body leaves v as it is.
func BindOptional(c echo.Context, v any) error {
	body, err := readBody(c)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return err
	}
	return Decode(body, v)
}

func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var httpErr *echo.HTTPError
		if errors.As(err, &httpErr) && httpErr.Code == http.StatusRequestEntityTooLarge {
			return nil, err
		}
		return nil, BadRequest("read body: %v", err)
	}
	return body, nil
}

// Decode is the one JSON decoder of request bodies: a body must be one
// JSON value of v's shape and nothing else. An unknown field (a misspelt
// "orderID" would otherwise be dropped silently), a value of the wrong
// type, malformed JSON or anything after the value is a 400 that says
// what is wrong.
func Decode(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return BadRequest("malformed JSON body: the body is empty")
		}
		return BadRequest("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("malformed JSON body: data after the JSON value")
	}
	return nil
}

// Run serves on Config.Addr until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully; it closes
// ln.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	t := s.cfg.Timeouts.withDefaults()
	srv := &http.Server{Handler: s.Echo, ReadHeaderTimeout: t.ReadHeader, ReadTimeout: t.Read,
		WriteTimeout: t.Write, IdleTimeout: t.Idle}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}
