package tracing_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

func TestReadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    tracing.Config
		wantErr string
	}{
		{"defaults: no exporter", nil, tracing.Config{ServiceName: "order-service", Sampler: tracing.DefaultSampler,
			RecentSpans: tracing.DefaultRecentSpans}, ""},
		{"OpenTelemetry's variables", map[string]string{"OTEL_SERVICE_NAME": "orders", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://jaeger:4318/",
			"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25", "OTEL_SDK_DISABLED": "true", "OTEL_RECENT_SPANS": "0"},
			tracing.Config{ServiceName: "orders", Endpoint: "http://jaeger:4318", Sampler: "parentbased_traceidratio", SamplerArg: "0.25",
				Disabled: true}, ""},
		{"an unknown sampler", map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, tracing.Config{}, "OTEL_TRACES_SAMPLER=\"jaeger_remote\""},
		{"a ratio above 1", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, tracing.Config{}, "OTEL_TRACES_SAMPLER_ARG=\"2\""},
		{"an endpoint that is no URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "jaeger:4318"}, tracing.Config{}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"too many recent spans", map[string]string{"OTEL_RECENT_SPANS": "1000000"}, tracing.Config{}, "OTEL_RECENT_SPANS=1000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			got := tracing.ReadConfig(r, "order-service")
			err := r.Err()
			if err == nil {
				err = got.Validate()
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("config %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// The recent-spans store keeps the newest spans, oldest first, with their
// parents and links; a disabled tracing keeps none and gives no provider.
func TestRecentKeepsTheNewestSpans(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tr, err := tracing.New(ctx, tracing.Config{ServiceName: "points-service", Sampler: tracing.DefaultSampler, RecentSpans: 3}, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tr.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	tracer := tracing.Tracer(tr.Provider())
	rootCtx, root := tracer.Start(ctx, "root")
	_, linked := tracer.Start(ctx, "other")
	linked.End()
	for _, name := range []string{"a", "b"} {
		_, s := tracer.Start(rootCtx, name, trace.WithLinks(trace.Link{SpanContext: linked.SpanContext()}))
		s.End()
	}
	root.End()
	if len(rec.Ended()) != 4 {
		t.Fatalf("the extra processor saw %d spans, want 4", len(rec.Ended()))
	}
	all := tr.Recent().Spans("", 10)
	if len(all) != 3 || all[0].Name != "a" || all[1].Name != "b" || all[2].Name != "root" {
		t.Fatalf("kept %+v, want a, b, root", all)
	}
	traceID := root.SpanContext().TraceID().String()
	of := tr.Recent().Spans(traceID, 0)
	if len(of) != 3 {
		t.Fatalf("spans of the trace: %+v", of)
	}
	a := of[0]
	if a.ParentSpanID != root.SpanContext().SpanID().String() || a.Service != "points-service" ||
		len(a.Links) != 1 || a.Links[0].SpanID != linked.SpanContext().SpanID().String() {
		t.Errorf("span a %+v: want the root's child, of points-service, linking %s", a, linked.SpanContext().SpanID())
	}
	if got := tr.Recent().Spans("", 1); len(got) != 1 || got[0].Name != "root" {
		t.Errorf("newest one: %+v", got)
	}

	off, err := tracing.New(ctx, tracing.Config{ServiceName: "x", Disabled: true})
	if err != nil || off.Provider() != nil || len(off.Recent().Spans("", 10)) != 0 {
		t.Errorf("disabled: %v, provider %v", err, off.Provider())
	}
}
