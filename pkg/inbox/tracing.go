package inbox

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// startApply starts the span of one transaction applying events, each
// given by the context it arrived with: a span ("inbox apply") on ctx, so
// the work keeps ctx's deadline, that continues the trace of the first
// event and links every event's span, so each event's trace reaches the
// transaction that applied it, however many others shared it. A batch of
// one is simply a child of its event's span. The tracer is the provider of
// the first event's span: the processor needs no tracing of its own, and
// an event outside a trace records nothing.
func startApply(ctx context.Context, consumer string, events ...context.Context) (context.Context, trace.Span) {
	first := events[0]
	links := make([]trace.Link, 0, len(events))
	for _, e := range events {
		if l := trace.LinkFromContext(e); l.SpanContext.IsValid() {
			links = append(links, l)
		}
	}
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(first))
	return tracing.FromContext(first).Start(ctx, "inbox apply", trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("consumer", consumer), attribute.Int("messaging.batch.message_count", len(events))))
}
