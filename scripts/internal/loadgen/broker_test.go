package loadgen_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// published is one record read back from the topic.
type published struct {
	key     string
	headers map[string]string
	env     event.Envelope
}

func readBack(t *testing.T, brokers []string, topic string, n int) []published {
	t.Helper()
	var out []published
	for _, r := range servicetest.Consume(t, brokers, topic, n) {
		env, err := event.Parse(r.Value)
		if err != nil {
			t.Fatalf("record at %d/%d is not a valid event: %v", r.Partition, r.Offset, err)
		}
		p := published{key: string(r.Key), headers: map[string]string{}, env: env}
		for _, h := range r.Headers {
			p.headers[h.Key] = string(h.Value)
		}
		out = append(out, p)
	}
	return out
}

// endOffsets is how many records topic holds.
func endOffsets(t *testing.T, brokers []string, topic string) int64 {
	t.Helper()
	m, err := lag.NewMeter(brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), servicetest.Timeout)
	defer cancel()
	s, err := m.Measure(ctx, "nobody", topic)
	if err != nil {
		t.Fatal(err)
	}
	return s.EndOffsets
}

func TestPublishViaBroker(t *testing.T) {
	const count, skus, runID = 2000, 7, "bt-1"
	topic := postgrestest.UniqueName("order_events")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := loadgen.Config{Via: loadgen.ViaBroker, Count: count, RunID: runID, SKUs: skus, Brokers: b.Addrs(),
		Topic: topic, Concurrency: 4, Batch: 128, MaxErrors: 1}
	var settled atomic.Int64
	cfg.Progress = func(n int) { settled.Add(int64(n)) }

	var stdout, stderr strings.Builder
	res, err := loadgen.Run(context.Background(), cfg, &stdout, &stderr)
	if err != nil || res.Published != count || res.Failed != 0 {
		t.Fatalf("Run = %+v, %v; want %d published", res, err, count)
	}
	if got := settled.Load(); got != count {
		t.Errorf("Progress was told of %d events, want %d", got, count)
	}
	for _, want := range []string{"events published  2000", "errors            0", "rate "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "2000/2000") {
		t.Errorf("progress bar never reached 2000/2000: %q", stderr.String())
	}

	if got := endOffsets(t, b.Addrs(), topic); got != count {
		t.Errorf("topic holds %d records, want %d", got, count)
	}
	first := readBack(t, b.Addrs(), topic, count)
	byEvent := map[string]published{}
	skuSeen := map[string]int{}
	for _, p := range first {
		env := p.env
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(env.AggregateID, "O-"+runID+"-"), "%d", &i); err != nil {
			t.Fatalf("order id %q: %v", env.AggregateID, err)
		}
		if env.EventType != event.OrderPaid || env.AggregateVersion != 3 || env.EventID != loadgen.EventID(runID, i) ||
			env.AggregateID != loadgen.OrderID(runID, i) {
			t.Fatalf("event %+v, want OrderPaid v3 of order %d with eventId %s", env, i, loadgen.EventID(runID, i))
		}
		if p.key != env.AggregateID {
			t.Errorf("key %q, want the order id %q", p.key, env.AggregateID)
		}
		wantHeaders := map[string]string{event.HeaderEventID: env.EventID, event.HeaderEventType: "OrderPaid",
			event.HeaderEventVersion: "1", event.HeaderAggregateID: env.AggregateID, event.HeaderTraceparent: env.Traceparent()}
		if !maps.Equal(p.headers, wantHeaders) {
			t.Errorf("headers %v, want %v", p.headers, wantHeaders)
		}
		var data event.OrderPaidData
		if err := env.DecodeData(&data); err != nil || len(data.Items) != 1 || data.Items[0].SKU != loadgen.SKUFor(runID, i, skus) {
			t.Errorf("data of order %d = %+v (%v), want one item of %s", i, data, err, loadgen.SKUFor(runID, i, skus))
		}
		skuSeen[data.Items[0].SKU]++
		byEvent[env.EventID] = p
	}
	if len(byEvent) != count {
		t.Fatalf("%d distinct event ids among %d records, want %d", len(byEvent), count, count)
	}
	if len(skuSeen) != skus {
		t.Errorf("SKUs used: %v, want %d", slices.Sorted(maps.Keys(skuSeen)), skus)
	}

	// The same run id again: the same events, which consumers must treat as
	// duplicates.
	stdout.Reset()
	if res, err := loadgen.Run(context.Background(), cfg, &stdout, &stderr); err != nil || res.Published != count {
		t.Fatalf("second Run = %+v, %v", res, err)
	}
	if got := endOffsets(t, b.Addrs(), topic); got != 2*count {
		t.Errorf("after the second run the topic holds %d records, want %d", got, 2*count)
	}
	all := readBack(t, b.Addrs(), topic, 2*count)
	again := map[string]bool{}
	for _, p := range all {
		prev, ok := byEvent[p.env.EventID]
		if !ok {
			t.Fatalf("second run published a new event id %s", p.env.EventID)
		}
		if p.key != prev.key || p.env.TraceID != prev.env.TraceID || string(p.env.Data) != string(prev.env.Data) {
			t.Errorf("event %s differs between the runs: %+v vs %+v", p.env.EventID, p.env, prev.env)
		}
		again[p.env.EventID] = true
	}
	if len(again) != count {
		t.Errorf("%d distinct event ids over both runs, want %d", len(again), count)
	}
}

func TestPublishPacesWithRate(t *testing.T) {
	topic := postgrestest.UniqueName("order_events")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// 30 events at 100/s with batches capped at a second's worth: the
	// limiter's burst lets the first 100 through, so this checks that a
	// rate-limited run completes and counts, not the speed.
	cfg := loadgen.Config{Via: loadgen.ViaBroker, Count: 30, RunID: "rate", SKUs: 1, Brokers: b.Addrs(),
		Topic: topic, Concurrency: 2, Batch: 500, Rate: 100}
	res, err := loadgen.Run(context.Background(), cfg, &strings.Builder{}, &strings.Builder{})
	if err != nil || res.Published != 30 {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if got := len(servicetest.Consume(t, b.Addrs(), topic, 30)); got != 30 {
		t.Errorf("consumed %d, want 30", got)
	}
}

// A broker that refuses every record: each order that lost an event is
// one failure, however many events it had, and the run says so.
func TestPublishReportsEachFailedOrderOnce(t *testing.T) {
	tests := []struct {
		name string
		mix  bool
	}{
		{"OrderPaid only", false},
		{"mixed, orders of several events", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const count = 60
			topic := postgrestest.UniqueName("order_events")
			b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topic}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				b.Cluster().KeepControl()
				produce := req.(*kmsg.ProduceRequest)
				resp := produce.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range produce.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic, st.TopicID = rt.Topic, rt.TopicID
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition = rp.Partition
						sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			cfg := loadgen.Config{Via: loadgen.ViaBroker, Count: count, RunID: "fail", SKUs: 3, Brokers: b.Addrs(),
				Topic: topic, Concurrency: 3, Batch: 7, Mix: tt.mix}
			var stdout strings.Builder
			res, err := loadgen.Run(context.Background(), cfg, &stdout, &strings.Builder{})
			if err == nil || !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Errorf("Run error %v, want one wrapping %v", err, kerr.TopicAuthorizationFailed)
			}
			if res.Failed != count || res.Published != 0 {
				t.Errorf("Run = %+v; want all %d orders failed, each once", res, count)
			}
			if !strings.Contains(stdout.String(), fmt.Sprintf("errors            %d", count)) {
				t.Errorf("summary lacks the %d errors:\n%s", count, stdout.String())
			}
		})
	}
}
