package httpapi_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

// tracedServer serves GET /things/:id, which answers the trace id its
// log lines carry, and POST /fail, which fails with a 500.
func tracedServer(tp trace.TracerProvider) *httpapi.Server {
	srv := httpapi.New(httpapi.Config{Tracing: tp}, slog.New(slog.DiscardHandler))
	srv.Echo.GET("/things/:id", func(c echo.Context) error {
		return c.String(http.StatusOK, observability.TraceID(c.Request().Context()))
	})
	srv.Echo.GET("/fail", func(echo.Context) error { return io.ErrUnexpectedEOF })
	return srv
}

func TestRequestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	srv := tracedServer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	tests := []struct {
		name, path, traceparent string
		status                  int
		spans                   int
		spanName                string
		parent                  string
	}{
		{"a caller's trace is continued", "/things/T-1", "00-" + callerTrace + "-" + callerSpan + "-01", 200, 1, "GET /things/:id", callerSpan},
		{"a request without a trace starts one", "/things/T-2", "", 200, 1, "GET /things/:id", ""},
		{"a failure is the span's error", "/fail", "", 500, 1, "GET /fail", ""},
		{"probes record nothing", "/healthz", "", 200, 0, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Ended())
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			w := httptest.NewRecorder()
			srv.Echo.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			ended := rec.Ended()[before:]
			if len(ended) != tt.spans {
				t.Fatalf("%d spans, want %d", len(ended), tt.spans)
			}
			if tt.spans == 0 {
				return
			}
			s := ended[0]
			if s.Name() != tt.spanName || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span %q %s, want %q server", s.Name(), s.SpanKind(), tt.spanName)
			}
			if got := s.Parent().SpanID(); tt.parent != "" && got.String() != tt.parent || tt.parent == "" && s.Parent().IsValid() {
				t.Errorf("parent %s, want %q", got, tt.parent)
			}
			if tt.parent != "" && s.SpanContext().TraceID().String() != callerTrace {
				t.Errorf("trace %s, want the caller's %s", s.SpanContext().TraceID(), callerTrace)
			}
			if tt.status == 200 && strings.HasPrefix(tt.path, "/things") && w.Body.String() != s.SpanContext().TraceID().String() {
				t.Errorf("log trace id %q, want the span's %s", w.Body.String(), s.SpanContext().TraceID())
			}
			if (s.Status().Code.String() == "Error") != (tt.status >= 500) {
				t.Errorf("span status %v for %d", s.Status(), tt.status)
			}
		})
	}
}

// BenchmarkRequestTracing measures what a span costs a request: no
// tracing, every trace sampled into the recent-spans store, and none sampled
// (still propagated).
func BenchmarkRequestTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"off", nil},
		{"sampled", sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracing.NewRecent(tracing.DefaultRecentSpans)))},
		{"unsampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := tracedServer(bc.tp)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/things/T-1", nil)
				req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
				srv.Echo.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
