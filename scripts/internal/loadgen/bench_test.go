package loadgen_test

import (
	"context"
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// benchPartitions is the partition count of `make run`'s order-events.
const benchPartitions = 64

// BenchmarkBrokerPublish sets the load generator's broker path beside the
// limit of the stage it drives: on one embedded broker, each round
// publishes BENCH_PUBLISH_EVENTS OrderPaid records to a fresh topic of 64
// partitions twice, first with a bare franz-go producer given pre-built
// records (the same keys, payloads and headers, produced asynchronously
// and flushed), then with loadgen.Run configured as `publish_orders --via
// broker` parses its defaults. Each clock runs from creating the client
// until the last acknowledgement, and the topic's end offsets must then
// add up to exactly the events published.
func BenchmarkBrokerPublish(b *testing.B) {
	events := envconfig.New(os.Getenv).Int("BENCH_PUBLISH_EVENTS", 100_000)
	if events < 1 {
		b.Fatalf("BENCH_PUBLISH_EVENTS=%d: want at least 1", events)
	}
	br, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: benchPartitions})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Close)
	adm := newAdmin(b, br.Addrs())
	const runID = "bench"
	template := prebuilt(b, runID, events)

	var bare, gen time.Duration
	b.ResetTimer()
	for range b.N {
		// Neither clock pays for collecting the garbage of building the
		// bare producer's records or of the side before it.
		topic := newTopic(b, adm)
		runtime.GC()
		bare += timeBare(b, br.Addrs(), topic, template)
		checkEnds(b, adm, topic, events)

		topic = newTopic(b, adm)
		runtime.GC()
		gen += timeLoadgen(b, br.Addrs(), topic, runID, events)
		checkEnds(b, adm, topic, events)
	}
	b.StopTimer()
	bareRate := float64(b.N*events) / bare.Seconds()
	genRate := float64(b.N*events) / gen.Seconds()
	b.ReportMetric(bareRate, "bare-events/s")
	b.ReportMetric(genRate, "loadgen-events/s")
	b.ReportMetric(genRate/bareRate, "ratio")
	b.Logf("%d events × %d rounds: bare producer %v, load generator %v", events, b.N, bare, gen)
}

// prebuilt are the records the load generator publishes for orders 1 …
// n, built before any clock starts.
func prebuilt(b *testing.B, runID string, n int) []*kgo.Record {
	b.Helper()
	now := time.Now()
	recs := make([]*kgo.Record, 0, n)
	for i := 1; i <= n; i++ {
		env, err := loadgen.OrderPaid(runID, i, 100, now)
		if err != nil {
			b.Fatal(err)
		}
		rec, err := suiteapi.Record("", env)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, rec)
	}
	return recs
}

// timeBare produces template to topic with nothing but franz-go.
func timeBare(b *testing.B, brokers []string, topic string, template []*kgo.Record) time.Duration {
	b.Helper()
	recs := make([]*kgo.Record, len(template))
	for i, t := range template {
		recs[i] = &kgo.Record{Key: t.Key, Value: t.Value, Headers: t.Headers}
	}
	ctx := context.Background()
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(len(recs)))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	failures := make(chan error, 1)
	for _, r := range recs {
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failures <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	took := time.Since(start)
	select {
	case err := <-failures:
		b.Fatalf("bare producer: %v", err)
	default:
	}
	return took
}

// timeLoadgen runs the load generator as `publish_orders --via broker
// --count events` runs it, its output discarded.
func timeLoadgen(b *testing.B, brokers []string, topic, runID string, events int) time.Duration {
	b.Helper()
	cfg, err := loadgen.Parse([]string{"--count", strconv.Itoa(events), "--run-id", runID,
		"--brokers", brokers[0], "--topic", topic}, func(string) string { return "" }, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	res, err := loadgen.Run(context.Background(), cfg, io.Discard, io.Discard)
	took := time.Since(start)
	if err != nil || res.Published != events {
		b.Fatalf("load generator: %+v, %v", res, err)
	}
	return took
}

func newAdmin(b *testing.B, brokers []string) *kadm.Client {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// newTopic creates an empty topic of benchPartitions partitions.
func newTopic(b *testing.B, adm *kadm.Client) string {
	b.Helper()
	topic := postgrestest.UniqueName("publish_bench")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, benchPartitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// checkEnds fails the benchmark unless topic holds exactly want records.
func checkEnds(b *testing.B, adm *kadm.Client, topic string, want int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		b.Fatalf("list end offsets of %s: %v", topic, err)
	}
	var got int64
	ends.Each(func(o kadm.ListedOffset) { got += o.Offset })
	if got != int64(want) {
		b.Fatalf("%s holds %d records, want %d", topic, got, want)
	}
}
