package inbox

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/tracing"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// The attributes of an "inbox apply" span that say what the transaction
// did with each event: parallel lists, the i-th outcome (APPLIED,
// DUPLICATE, IGNORED_STALE_EVENT, WAITING_FOR_GAP, …) being the i-th
// event's. A reader of the trace (the console) tells an effect from a
// recognised duplicate by them.
const (
	AttrEventIDs = "inbox.event_ids"
	AttrOutcomes = "inbox.outcomes"
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

// endApply records on the transaction's span what it did with each event
// of ids (outcomes, parallel to ids; an event whose transaction failed has
// an empty outcome), marks the span failed with err, and ends it.
func endApply(span trace.Span, ids []string, outcomes []versionguard.Outcome, err error) {
	if span.IsRecording() {
		out := make([]string, len(outcomes))
		for i, o := range outcomes {
			out[i] = string(o)
		}
		span.SetAttributes(attribute.StringSlice(AttrEventIDs, ids), attribute.StringSlice(AttrOutcomes, out))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}
