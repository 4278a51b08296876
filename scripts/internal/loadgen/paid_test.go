package loadgen_test

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// The broker path's OrderPaid records, built from a template, are the
// records OrderPaid and Record build with the schema check: the same key,
// payload bytes and headers, so the same envelope once parsed.
func TestPaidRecordIsTheValidatedRecord(t *testing.T) {
	tests := []struct {
		name    string
		runID   string
		skus    int
		indexes []int
		at      time.Time
	}{
		// Every index up to a few SKU cycles, and each place where the
		// index or the SKU number gains a digit.
		{"whole milliseconds", "r1", 100, append(span(1, 250), 999, 1000, 1001, 9999, 10_000, 10_001),
			time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)},
		{"sub-millisecond time in another zone", "backlog-01", 7, span(99_950, 100_050),
			time.Date(2026, 12, 1, 23, 59, 59, 123_456_789, time.FixedZone("CST", 8*3600))},
		{"one SKU, long run id, huge indexes", "A.b_c-0123456789012345678901234567890123", 1,
			[]int{999_999, 1_000_000, 12_345_678, loadgen.MaxCount}, time.Now()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, i := range tt.indexes {
				env, err := loadgen.OrderPaid(tt.runID, i, tt.skus, tt.at)
				if err != nil {
					t.Fatal(err)
				}
				want, err := suiteapi.Record("order-events", env)
				if err != nil {
					t.Fatal(err)
				}
				got, err := loadgen.PaidRecord(tt.runID, tt.skus, i, tt.at)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) {
					t.Fatalf("order %d: key %s value\n%s\nwant key %s value\n%s", i, got.Key, got.Value, want.Key, want.Value)
				}
				if !reflect.DeepEqual(got.Headers, want.Headers) {
					t.Fatalf("order %d: headers %v, want %v", i, got.Headers, want.Headers)
				}
				parsed, err := event.Parse(got.Value)
				if err != nil {
					t.Fatalf("order %d: %v", i, err)
				}
				env.Data = parsed.Data // compared as bytes above
				if !reflect.DeepEqual(parsed, env) {
					t.Fatalf("order %d: parsed %+v, want %+v", i, parsed, env)
				}
			}
		})
	}
}

func span(first, last int) []int {
	var s []int
	for i := first; i <= last; i++ {
		s = append(s, i)
	}
	return s
}
