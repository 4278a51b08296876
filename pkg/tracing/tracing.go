// Package tracing records the spans of every service with the
// OpenTelemetry SDK: one tracer provider per service, configured by
// OpenTelemetry's own variables, exporting over OTLP/HTTP when an endpoint
// is set and always keeping the most recent spans in memory (Recent), so
// a trace can be read from the service itself without a collector.
//
// The trace context crosses the suite's process boundaries as a W3C
// traceparent: in HTTP headers, in the headers of a Kafka message and in
// the headers column of an outbox row (Inject, Extract).
//
// The provider is passed to the code that starts spans, never installed as
// OpenTelemetry's global one: code that only continues a trace takes the
// provider of the span its context carries (trace.Span.TracerProvider).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

// InstrumentationName names the suite's tracers.
const InstrumentationName = "github.com/reliable-orders/fulfillment"

// The values of OTEL_TRACES_SAMPLER the suite understands: the
// specification's, without the vendor ones.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// DefaultSampler is OTEL_TRACES_SAMPLER's default, the specification's:
// every trace a service starts is sampled, and a continued trace keeps its
// caller's decision.
const DefaultSampler = SamplerParentBasedAlwaysOn

// DefaultRecentSpans is how many ended spans a service keeps in memory
// (OTEL_RECENT_SPANS): the spans of a few hundred orders' paths, a few
// hundred KiB.
const DefaultRecentSpans = 2048

// MaxRecentSpans bounds OTEL_RECENT_SPANS.
const MaxRecentSpans = 100_000

// tracesPath is the OTLP/HTTP path of traces, which the specification
// appends to OTEL_EXPORTER_OTLP_ENDPOINT.
const tracesPath = "/v1/traces"

// Config is the tracing of one service (README.md, Configuration).
type Config struct {
	// ServiceName (OTEL_SERVICE_NAME) names the service in its spans;
	// default the service's own name.
	ServiceName string
	// Disabled (OTEL_SDK_DISABLED) records no span at all: no exporter,
	// nothing in Recent, and the traceparent of a message is the one its
	// producer derived.
	Disabled bool
	// Endpoint (OTEL_EXPORTER_OTLP_ENDPOINT) is the base URL of an
	// OTLP/HTTP receiver (a collector, Jaeger: http://jaeger:4318); the
	// spans go to Endpoint/v1/traces. Empty: no exporter, the spans are
	// only kept in memory.
	Endpoint string
	// Sampler (OTEL_TRACES_SAMPLER) and SamplerArg
	// (OTEL_TRACES_SAMPLER_ARG, the ratio of the *traceidratio samplers,
	// default 1) decide which traces are recorded.
	Sampler    string
	SamplerArg string
	// RecentSpans (OTEL_RECENT_SPANS) is how many ended spans Recent
	// keeps; 0 keeps none.
	RecentSpans int
}

// ReadConfig reads OTEL_SERVICE_NAME, OTEL_SDK_DISABLED,
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER,
// OTEL_TRACES_SAMPLER_ARG and OTEL_RECENT_SPANS through r; service is the
// default service name.
func ReadConfig(r *envconfig.Reader, service string) Config {
	c := Config{
		ServiceName: r.String("OTEL_SERVICE_NAME", service),
		Disabled:    r.Bool("OTEL_SDK_DISABLED", false),
		Sampler:     strings.ToLower(r.String("OTEL_TRACES_SAMPLER", DefaultSampler)),
		SamplerArg:  r.String("OTEL_TRACES_SAMPLER_ARG", ""),
		RecentSpans: r.Int("OTEL_RECENT_SPANS", DefaultRecentSpans),
	}
	if r.String("OTEL_EXPORTER_OTLP_ENDPOINT", "") != "" {
		c.Endpoint = r.URL("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	}
	return c
}

// Validate reports every unusable setting, naming its variable.
func (c Config) Validate() error {
	var errs []error
	if c.ServiceName == "" {
		errs = append(errs, errors.New("OTEL_SERVICE_NAME is empty"))
	}
	if _, err := c.sampler(); err != nil {
		errs = append(errs, err)
	}
	if c.RecentSpans < 0 || c.RecentSpans > MaxRecentSpans {
		errs = append(errs, fmt.Errorf("OTEL_RECENT_SPANS=%d: want 0 to %d", c.RecentSpans, MaxRecentSpans))
	}
	return errors.Join(errs...)
}

// sampler builds the sampler Sampler and SamplerArg name.
func (c Config) sampler() (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if c.SamplerArg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(c.SamplerArg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", c.SamplerArg)
		}
		return f, nil
	}
	switch c.Sampler {
	case SamplerAlwaysOn:
		return sdktrace.AlwaysSample(), nil
	case SamplerAlwaysOff:
		return sdktrace.NeverSample(), nil
	case SamplerParentBasedAlwaysOn, "":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case SamplerParentBasedAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		f, err := ratio()
		if err != nil {
			return nil, err
		}
		if c.Sampler == SamplerTraceIDRatio {
			return sdktrace.TraceIDRatioBased(f), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER=%q: want %s", c.Sampler, strings.Join([]string{SamplerAlwaysOn, SamplerAlwaysOff,
		SamplerTraceIDRatio, SamplerParentBasedAlwaysOn, SamplerParentBasedAlwaysOff, SamplerParentBasedTraceIDRatio}, ", "))
}

// Tracing is a service's tracer provider with its in-memory store.
type Tracing struct {
	sdk    *sdktrace.TracerProvider
	recent *Recent
}

// New builds the tracing cfg describes. extra are further span
// processors (a test's recorder). Shut it down when the service stops, so
// the last spans are exported.
func New(ctx context.Context, cfg Config, extra ...sdktrace.SpanProcessor) (*Tracing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Disabled {
		return &Tracing{recent: NewRecent(0)}, nil
	}
	sampler, err := cfg.sampler()
	if err != nil {
		return nil, err
	}
	recent := NewRecent(cfg.RecentSpans)
	opts := []sdktrace.TracerProviderOption{
		// Schemaless and without resource.Default(): that one reads
		// OTEL_RESOURCE_ATTRIBUTES from the process's environment, and
		// pkg/envconfig is the one place that reads it.
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(cfg.ServiceName))),
		sdktrace.WithSampler(sampler),
		sdktrace.WithSpanProcessor(recent),
	}
	for _, p := range extra {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	if cfg.Endpoint != "" {
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint+tracesPath))
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracing{sdk: tp, recent: recent}, nil
}

// Provider is the tracer provider, nil when tracing is disabled: the
// code given nil records no span and leaves every traceparent as it is.
func (t *Tracing) Provider() trace.TracerProvider {
	if t.sdk == nil {
		return nil
	}
	return t.sdk
}

// Recent is the store of the most recent spans.
func (t *Tracing) Recent() *Recent { return t.recent }

// Shutdown exports the spans still queued and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Tracer is the suite's tracer of tp; a nil tp is a no-op one.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(InstrumentationName)
}

// FromContext is the suite's tracer of the provider of the span ctx
// carries: code that only continues a trace (the outbox write, a batch of
// events) needs no provider of its own, and records nothing outside one.
func FromContext(ctx context.Context) trace.Tracer {
	return Tracer(trace.SpanFromContext(ctx).TracerProvider())
}

// Inject writes the traceparent of the span ctx carries into headers; it
// writes nothing when ctx carries none.
func Inject(ctx context.Context, headers map[string]string) {
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(headers))
}

// Extract returns ctx carrying the remote span context of headers'
// traceparent, or ctx when it has none or a malformed one.
func Extract(ctx context.Context, headers map[string]string) context.Context {
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(headers))
}

// Propagator is the suite's propagator: W3C trace context only (no
// baggage crosses the suite's boundaries).
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }
