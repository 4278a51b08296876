package observability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/observability"
)

func TestLoggerCarriesTraceAndEventIDs(t *testing.T) {
	var buf bytes.Buffer
	logger := observability.NewLogger(&buf, "inventory-service", "info")
	ctx := observability.WithEvent(context.Background(), "4bf92f3577b34da6", "E-1001")
	logger.InfoContext(ctx, "applied", "orderId", "O-1")
	logger.DebugContext(ctx, "hidden at info level")

	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("log line is not one JSON object: %q", buf.String())
	}
	for k, want := range map[string]string{"traceId": "4bf92f3577b34da6", "eventId": "E-1001", "service": "inventory-service", "msg": "applied"} {
		if line[k] != want {
			t.Errorf("%s = %v, want %s", k, line[k], want)
		}
	}
	if observability.TraceID(ctx) != "4bf92f3577b34da6" {
		t.Error("TraceID lost")
	}
}

func TestRegistryExposesProcessMetrics(t *testing.T) {
	families, err := observability.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !names[want] {
			t.Errorf("registry lacks %s", want)
		}
	}
}
