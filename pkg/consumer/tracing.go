package consumer

import (
	"github.com/ThreeDotsLabs/watermill/message"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// traceMessages records a consumer span of each message ("consume
// <topic>"), a child of the span that sent it (the traceparent in its
// headers), around the message's attempts and its dead-lettering; the
// handler's context carries it, so the batch that applies the event links
// to it. Watermill ships no OpenTelemetry middleware of its own, and the
// contrib ones wrap publishers and subscribers, not the handler whose
// context the consumer continues; this one is a dozen lines.
func traceMessages(tp trace.TracerProvider, topic string) message.HandlerMiddleware {
	tracer := tracing.Tracer(tp)
	return func(h message.HandlerFunc) message.HandlerFunc {
		return func(msg *message.Message) ([]*message.Message, error) {
			ctx := tracing.Extract(msg.Context(), msg.Metadata)
			ctx, span := tracer.Start(ctx, "consume "+topic, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(semconv.MessagingSystemKafka, semconv.MessagingDestinationName(topic),
					attribute.String("event.id", msg.Metadata.Get(event.HeaderEventID)),
					attribute.String("event.type", msg.Metadata.Get(event.HeaderEventType))))
			defer span.End()
			msg.SetContext(ctx)
			out, err := h(msg)
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			return out, err
		}
	}
}
