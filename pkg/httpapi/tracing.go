package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// untraced are the routes whose requests record no span: probes and
// scrapes, which would crowd every trace store out, and the reading of
// the traces themselves.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true, "/admin/traces": true}

// traceRequests records a server span for each request, continuing the
// caller's trace when it sent a traceparent, and puts the trace id into
// the request's log lines. It is written here rather than taken from
// otelecho, which the OpenTelemetry contrib repository no longer ships for
// Echo v4: a dozen lines on the SDK's own API. The error is answered here
// (the one error handler, called once), so the span carries the status
// the client gets.
func traceRequests(tp trace.TracerProvider) echo.MiddlewareFunc {
	tracer := tracing.Tracer(tp)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if untraced[route] {
				return next(c)
			}
			req := c.Request()
			ctx := tracing.Propagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			ctx, span := tracer.Start(ctx, req.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(req.Method), semconv.HTTPRoute(route),
					semconv.URLPath(req.URL.Path)))
			defer span.End()
			if sc := span.SpanContext(); sc.IsValid() {
				ctx = observability.WithEvent(ctx, sc.TraceID().String(), "")
			}
			c.SetRequest(req.WithContext(ctx))
			if err := next(c); err != nil {
				c.Error(err)
			}
			status := c.Response().Status
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= http.StatusInternalServerError {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			return nil
		}
	}
}
