// Package httpapi builds the Echo server every service uses: JSON errors of
// the form {"businessCode": "...", "message": "..."} mapped from errors in
// one place (a value breaking a rule of pkg/event is a 400 everywhere), a 1 MiB body limit (413 above it), bearer-token admin routes,
// health, readiness and Prometheus metrics, and a graceful shutdown.
package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reliable-orders/fulfillment/pkg/event"
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
}

// Server is an Echo server with the suite's conventions.
type Server struct {
	Echo   *echo.Echo
	cfg    Config
	logger *slog.Logger
}

// New returns a server with health, readiness and metrics registered.
func New(cfg Config, logger *slog.Logger) *Server {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	s := &Server{Echo: e, cfg: cfg, logger: logger}
	e.HTTPErrorHandler = s.handleError
	e.Use(middleware.BodyLimit(fmt.Sprintf("%dB", MaxBodyBytes)))
	e.Use(middleware.Recover())
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

// registerProfiling serves Go's profiles under /admin/debug/pprof/, behind
// the admin token, so a slow drill can be profiled where it runs:
// go tool pprof http://127.0.0.1:8083/admin/debug/pprof/profile?seconds=10.
// (Importing net/http/pprof also registers on http.DefaultServeMux, which
// no service serves.)
func (s *Server) registerProfiling() {
	g := s.Admin()
	g.GET("/debug/pprof/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	g.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
	g.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
	g.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
	g.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
	g.GET("/debug/pprof/:name", func(c echo.Context) error {
		pprof.Handler(c.Param("name")).ServeHTTP(c.Response(), c.Request())
		return nil
	})
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
	var ruleErr *event.RuleError
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
	if apiErr.Status >= 500 {
		s.logger.ErrorContext(c.Request().Context(), "request failed",
			"method", c.Request().Method, "path", c.Path(), "error", err)
	}
	msg := apiErr.Message
	if apiErr.Status < 500 && apiErr.Err != nil {
		msg = apiErr.Error()
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

// Bind decodes the JSON body into v, rejecting unknown fields' types and
// malformed JSON with a 400 that says what is wrong.
func Bind(c echo.Context, v any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return BadRequest("Content-Type must be application/json")
	}
	if err := (&echo.DefaultBinder{}).BindBody(c, v); err != nil {
		var httpErr *echo.HTTPError
		if errors.As(err, &httpErr) && httpErr.Code == http.StatusRequestEntityTooLarge {
			return err
		}
		if errors.As(err, &httpErr) {
			return BadRequest("malformed JSON body: %v", httpErr.Message)
		}
		return BadRequest("malformed JSON body: %v", err)
	}
	return nil
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	srv := &http.Server{Handler: s.Echo, ReadHeaderTimeout: 10 * time.Second}
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
