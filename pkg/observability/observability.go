// Package observability gives every service the same JSON logs (with the
// traceId and eventId of the event being handled), Prometheus registry and
// health endpoints.
package observability

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

type ctxKey int

const (
	traceIDKey ctxKey = iota
	eventIDKey
)

// WithEvent returns ctx carrying the trace and event ids every log line
// written with it will show.
func WithEvent(ctx context.Context, traceID, eventID string) context.Context {
	if traceID != "" {
		ctx = context.WithValue(ctx, traceIDKey, traceID)
	}
	if eventID != "" {
		ctx = context.WithValue(ctx, eventIDKey, eventID)
	}
	return ctx
}

// TraceID returns the trace id ctx carries, if any.
func TraceID(ctx context.Context) string {
	s, _ := ctx.Value(traceIDKey).(string)
	return s
}

// contextHandler adds traceId and eventId from the record's context.
type contextHandler struct {
	slog.Handler
}

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if v, ok := ctx.Value(traceIDKey).(string); ok {
		r.AddAttrs(slog.String("traceId", v))
	}
	if v, ok := ctx.Value(eventIDKey).(string); ok {
		r.AddAttrs(slog.String("eventId", v))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// NewLogger returns a JSON logger for service at level ("debug", "info",
// "warn", "error"; anything else means info).
func NewLogger(w io.Writer, service, level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})
	return slog.New(contextHandler{h}).With("service", service)
}

// NewRegistry returns a Prometheus registry with the Go and process
// collectors, so memory and goroutines are visible on every service.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
