package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Recent keeps the last spans a service ended, in memory, for GET
// /admin/traces: a learner without a collector, or the console, reads a
// trace from each service itself. It is a span processor of the
// provider: written by the SDK as spans end, oldest overwritten first.
//
// It is written here rather than taken from the SDK's tracetest
// recorder, which keeps every span without bound and is meant for tests.
type Recent struct {
	mu    sync.Mutex
	spans []Span
	next  int
	full  bool
}

// Span is what Recent keeps of one ended span: enough to draw a trace's
// tree, its links and its timing.
type Span struct {
	TraceID      string            `json:"traceId"`
	SpanID       string            `json:"spanId"`
	ParentSpanID string            `json:"parentSpanId,omitempty"`
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	Service      string            `json:"service"`
	Start        time.Time         `json:"start"`
	End          time.Time         `json:"end"`
	DurationMs   float64           `json:"durationMs"`
	Status       string            `json:"status"`
	StatusText   string            `json:"statusText,omitempty"`
	Attributes   map[string]string `json:"attributes,omitempty"`
	Links        []Link            `json:"links,omitempty"`
}

// Link is a span another span links to: a batch links the events it
// applied.
type Link struct {
	TraceID string `json:"traceId"`
	SpanID  string `json:"spanId"`
}

// NewRecent returns a store of the last capacity spans; 0 keeps none.
func NewRecent(capacity int) *Recent {
	return &Recent{spans: make([]Span, max(capacity, 0))}
}

// OnStart implements sdktrace.SpanProcessor; a span is kept once it ended.
func (r *Recent) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd keeps s, overwriting the oldest span when the store is full.
func (r *Recent) OnEnd(s sdktrace.ReadOnlySpan) {
	if len(r.spans) == 0 {
		return
	}
	v := Span{
		TraceID: s.SpanContext().TraceID().String(),
		SpanID:  s.SpanContext().SpanID().String(),
		Name:    s.Name(),
		Kind:    s.SpanKind().String(),
		Start:   s.StartTime().UTC(),
		End:     s.EndTime().UTC(),
		Status:  s.Status().Code.String(),
	}
	v.DurationMs = float64(v.End.Sub(v.Start).Microseconds()) / 1000
	if s.Status().Code == codes.Error {
		v.StatusText = s.Status().Description
	}
	if p := s.Parent(); p.IsValid() {
		v.ParentSpanID = p.SpanID().String()
	}
	for _, kv := range s.Resource().Attributes() {
		if kv.Key == "service.name" {
			v.Service = kv.Value.String()
		}
	}
	if attrs := s.Attributes(); len(attrs) > 0 {
		v.Attributes = make(map[string]string, len(attrs))
		for _, kv := range attrs {
			v.Attributes[string(kv.Key)] = kv.Value.String()
		}
	}
	for _, l := range s.Links() {
		v.Links = append(v.Links, Link{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()})
	}
	r.mu.Lock()
	r.spans[r.next] = v
	r.next = (r.next + 1) % len(r.spans)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
}

// Shutdown implements sdktrace.SpanProcessor.
func (r *Recent) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdktrace.SpanProcessor.
func (r *Recent) ForceFlush(context.Context) error { return nil }

// Spans returns the kept spans of traceID, or the newest limit spans of
// any trace when traceID is empty, oldest first.
func (r *Recent) Spans(traceID string, limit int) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ordered []Span
	if r.full {
		ordered = append(append(ordered, r.spans[r.next:]...), r.spans[:r.next]...)
	} else {
		ordered = r.spans[:r.next]
	}
	out := []Span{}
	if traceID == "" {
		if limit > 0 && len(ordered) > limit {
			ordered = ordered[len(ordered)-limit:]
		}
		return append(out, ordered...)
	}
	for _, s := range ordered {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
