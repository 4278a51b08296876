package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

// maxStoredAnswer bounds the answer kept for a key: the suite's largest
// (a reconciliation run over many orders) is far below it, and a larger
// one is served but not kept, as a 5xx is not.
const maxStoredAnswer = 4 << 20

// storeTimeout bounds storing or releasing a key after the handler ran,
// on a context the client's disconnect does not cancel.
const storeTimeout = 5 * time.Second

// Middleware serves keyed requests of the state-changing methods (POST,
// PUT, PATCH, DELETE) as the package describes; skip, when not nil, leaves
// a request to the handler as if it had no key. Install it after routing
// and admission, so a shed request consumes no key, and after any
// authentication, so an unauthenticated request neither runs nor reads a
// key's answer. reg, when not nil, gets idempotency_requests_total.
func (s *Store) Middleware(logger *slog.Logger, reg prometheus.Registerer, skip func(echo.Context) bool) echo.MiddlewareFunc {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idempotency_requests_total",
		Help: "Requests with an Idempotency-Key, by what became of them: run, replayed, in_use, reused, invalid, not_kept.",
	}, []string{"outcome"})
	if reg != nil {
		if err := reg.Register(requests); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				requests = already.ExistingCollector.(*prometheus.CounterVec)
			}
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			values := req.Header.Values(Header)
			if len(values) == 0 || !changesState(req.Method) || (skip != nil && skip(c)) {
				return next(c)
			}
			key, err := ParseKey(values)
			if err != nil {
				requests.WithLabelValues("invalid").Inc()
				return &httpapi.Error{Status: http.StatusBadRequest, BusinessCode: CodeKeyInvalid,
					Message: fmt.Sprintf("%s: %v", Header, err)}
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				var httpErr *echo.HTTPError
				if errors.As(err, &httpErr) {
					return httpErr
				}
				return httpapi.BadRequest("read body: %v", err)
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			r := Request{Scope: req.Method + " " + c.Path(), Key: key,
				Fingerprint: Fingerprint(req.Method, req.URL.RequestURI(), body)}
			claim, err := s.Claim(req.Context(), r)
			if err != nil {
				return err
			}
			switch claim.Verdict {
			case Replay:
				requests.WithLabelValues("replayed").Inc()
				c.Response().Header().Set(ReplayedHeader, "true")
				if claim.Answer.ContentType == "" && len(claim.Answer.Body) == 0 {
					return c.NoContent(claim.Answer.Status)
				}
				return c.Blob(claim.Answer.Status, claim.Answer.ContentType, claim.Answer.Body)
			case InUse:
				requests.WithLabelValues("in_use").Inc()
				return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeKeyInUse, RetryAfter: time.Second,
					Message: fmt.Sprintf("a request with %s %q is still being served; try again for its answer", Header, key)}
			case Reused:
				requests.WithLabelValues("reused").Inc()
				return &httpapi.Error{Status: http.StatusUnprocessableEntity, BusinessCode: CodeKeyReused,
					Message: fmt.Sprintf("%s %q was sent before with another request to %s; a new request needs a new key",
						Header, key, r.Scope)}
			}
			requests.WithLabelValues("run").Inc()
			if claim.TakenOver {
				logger.WarnContext(req.Context(), "idempotency key taken over after its lock timeout: its earlier run left no answer",
					"scope", r.Scope, "key", key)
			}
			return s.run(c, next, r, claim.Owner, logger, requests)
		}
	}
}

// run serves the claimed request and keeps its answer, or releases the
// key when the answer may not be kept.
func (s *Store) run(c echo.Context, next echo.HandlerFunc, r Request, owner uuid.UUID, logger *slog.Logger, requests *prometheus.CounterVec) error {
	ctx := c.Request().Context()
	settle := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	}
	answered := false
	defer func() {
		if answered {
			return
		}
		// The handler panicked: the recovery answers 500, which is not
		// kept.
		sctx, cancel := settle()
		defer cancel()
		if err := s.Release(sctx, r, owner); err != nil {
			logger.ErrorContext(ctx, "release idempotency key", "scope", r.Scope, "error", err)
		}
	}()
	rec := &recorder{ResponseWriter: c.Response().Writer}
	c.Response().Writer = rec
	c.SetRequest(c.Request().WithContext(withRequest(ctx, r)))
	if err := next(c); err != nil {
		// Answer here, not after the middleware returns, so the answer
		// is known and kept.
		c.Error(err)
	}
	answered = true
	status := c.Response().Status
	sctx, cancel := settle()
	defer cancel()
	if !Keep(status) || rec.overflow {
		requests.WithLabelValues("not_kept").Inc()
		if err := s.Release(sctx, r, owner); err != nil {
			logger.ErrorContext(ctx, "release idempotency key", "scope", r.Scope, "error", err)
		}
		return nil
	}
	a := Answer{Status: status, ContentType: c.Response().Header().Get(echo.HeaderContentType), Body: rec.body.Bytes()}
	if err := s.Complete(sctx, r, owner, a); err != nil {
		// The answer went out; a retry runs again (lock timeout) or finds
		// the other run's answer.
		logger.ErrorContext(ctx, "store idempotent answer", "scope", r.Scope, "error", err)
	}
	return nil
}

// Keep reports whether an answer of status is kept for its key. A 5xx is
// not: the request failed or was shed, perhaps before it changed anything,
// and the client's retry must run it. Nor are the 4xx that describe the
// moment rather than the request: 401 and 403 (the credentials), 408, 409
// (a concurrent change: try again), 425 and 429. Every other answer, a
// business rejection or a 400 included, is the request's answer and is
// given again.
func Keep(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestTimeout, http.StatusConflict,
		http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// changesState reports whether method is one a key applies to; GET, HEAD
// and OPTIONS are safe to repeat anyway.
func changesState(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// recorder copies an answer's body, up to maxStoredAnswer, as it is
// written.
type recorder struct {
	http.ResponseWriter
	body     bytes.Buffer
	overflow bool
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.overflow {
		if r.body.Len()+len(p) > maxStoredAnswer {
			r.overflow = true
			r.body.Reset()
		} else {
			r.body.Write(p)
		}
	}
	return r.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
