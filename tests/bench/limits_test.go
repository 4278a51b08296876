package bench_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

const (
	// limitSQLBatch is a consumer's largest batch (CONSUMER_BATCH_SIZE):
	// with a window of several messages per partition, a draining
	// consumer's batches come close to it (<service>-events/batch).
	limitSQLBatch = consumer.DefaultBatchSize
	// limitSQLWorkers is a consumer's batch workers
	// (CONSUMER_BATCH_WORKERS): as many batch transactions as it has open
	// at once.
	limitSQLWorkers = consumer.DefaultBatchWorkers
	// limitPollEvery is the resolution of the service drain clocks: a count
	// over a growing dedup table costs milliseconds, so it is not asked
	// more often than this.
	limitPollEvery = 100 * time.Millisecond
	// limitTimeout bounds one stage.
	limitTimeout = 10 * time.Minute
)

// BenchmarkLimits measures, on one suite's broker and Postgres and with the
// same BENCH_LIMIT_EVENTS OrderPaid records (100 000), what each stage of
// the chain can do with no service code in it, then the services doing the
// same work, so the targets are ratios measured in the same run:
//
//   - bare-producer-events/s: franz-go producing the records, prebuilt, to a
//     fresh 64-partition topic (the broker's intake; the load generator's
//     limit);
//   - bare-router-events/s: a Watermill router over pkg/messaging's
//     subscriber (the services' Kafka settings) draining them with a no-op
//     handler (the consumers' delivery limit);
//   - bare-sql-events/s: the dedup row and one effect row per event written
//     with plain SQL in transactions of a consumer's largest batch, as
//     many at once as it has batch workers, in a fresh database (the
//     consumers' storage limit);
//   - <service>-events/s: inventory, points and notification, each alone,
//     draining the same backlog from the suite's topic; <service>-ratio is
//     that over the slower of bare router and bare SQL (target ≥ 0.5);
//     <service>-cpu-us/event the CPU time its process spent per event and
//     <service>-peak-rss-MiB its highest resident memory meanwhile, with
//     its Go heap in use (-peak-rss-heap-MiB), goroutine stacks
//     (-peak-rss-stacks-MiB) and goroutines (-peak-rss-goroutines) then;
//   - drain-s: a fresh backlog drained by the three consumers at once, one
//     instance each, as a backlog is drained in the suite;
//   - together-s: the records published while all three consumers run,
//     until all three have applied every one; overlap-ratio is that over
//     the slower of the two stages it overlaps, the publish and drain-s
//     (target ≤ 1.5), and together-ratio over the slowest of the publish
//     and each consumer's drain alone, which also counts what three
//     consumers sharing the machine cost each other.
//
// Drain rates count from the first event applied to the last (commit seen
// by a poll every 100 ms), so start-up and group joins are not counted.
func BenchmarkLimits(b *testing.B) {
	set := loadSettings(b)
	n := set.LimitEvents
	s := harness.Start(b, harness.Options{Partitions: messaging.Partitions, Env: suiteEnv(b)})
	seedLimitStock(s)
	adm := newAdmin(b, s.Broker)
	b.ResetTimer()
	for i := range b.N {
		run := fmt.Sprintf("lim%d", i)
		envs := limitBacklog(s, run, n)
		recs := limitRecords(b, envs)

		topic := newTopic(b, adm, "limits", messaging.Partitions)
		produce := bareProduce(b, s.Broker.Addrs(), topic, recs)
		router := bareRouter(b, s.Broker.Addrs(), topic, n)
		sqlRate := bareSQLApply(b, envs)
		stage := min(router, sqlRate)
		b.ReportMetric(float64(n)/produce.Seconds(), "bare-producer-events/s")
		b.ReportMetric(router, "bare-router-events/s")
		b.ReportMetric(sqlRate, "bare-sql-events/s")

		for _, c := range consumerServices {
			s.Stop(c)
		}
		bareProduce(b, s.Broker.Addrs(), s.Topic, recs)
		slowest := produce
		for _, c := range consumerServices {
			d := serviceDrain(b, s, c, n, set.ProfileDir)
			s.Stop(c)
			b.ReportMetric(d.rate, c+"-events/s")
			b.ReportMetric(d.peakRSS/(1<<20), c+"-peak-rss-MiB")
			b.ReportMetric(d.peakHeap/(1<<20), c+"-peak-rss-heap-MiB")
			b.ReportMetric(d.peakStacks/(1<<20), c+"-peak-rss-stacks-MiB")
			b.ReportMetric(d.peakGoroutines, c+"-peak-rss-goroutines")
			b.ReportMetric(d.cpuPerEvent, c+"-cpu-us/event")
			b.ReportMetric(d.meanBatch, c+"-events/batch")
			b.ReportMetric(d.rate/stage, c+"-ratio")
			slowest = max(slowest, time.Duration(float64(n)/d.rate*float64(time.Second)))
		}

		// Drain: a fresh copy of the backlog (new event ids) published with
		// the consumers stopped and drained by the three at once.
		bareProduce(b, s.Broker.Addrs(), s.Topic, limitRecords(b, limitBacklog(s, run+"d", n)))
		drain := groupDrain(b, s, consumerServices, n)
		for _, c := range consumerServices {
			s.Stop(c)
		}
		b.ReportMetric(drain.Seconds(), "drain-s")

		// Together: another copy published while the three consumers run.
		recs2 := limitRecords(b, limitBacklog(s, run+"b", n))
		before := map[string]int{}
		for _, c := range consumerServices {
			before[c] = processedCount(b, s, c)
		}
		s.StartServices(consumerServices...)
		start := time.Now()
		bareProduce(b, s.Broker.Addrs(), s.Topic, recs2)
		for _, c := range consumerServices {
			s.WaitUntil(limitTimeout, fmt.Sprintf("%s handled the %d events published with it running", c, n), func() bool {
				return appliedCount(s, c) >= float64(n)
			})
			// The count may hold a redelivery; the dedup rows say every
			// event was applied (at once, unless one was).
			s.WaitUntil(limitTimeout, fmt.Sprintf("%s applied the %d events published with it running", c, n), func() bool {
				return processedCount(b, s, c) >= before[c]+n
			})
		}
		together := time.Since(start)
		b.ReportMetric(together.Seconds(), "together-s")
		b.ReportMetric(together.Seconds()/slowest.Seconds(), "together-ratio")
		b.ReportMetric(together.Seconds()/max(produce, drain).Seconds(), "overlap-ratio")
		b.Logf("%d OrderPaid: bare producer %.0f/s, bare router %.0f/s, bare SQL %.0f/s; drained by the three consumers at once in %.1f s; publish and drain together %.1f s (publish alone %.2f s, slowest consumer alone %.1f s)",
			n, float64(n)/produce.Seconds(), router, sqlRate, drain.Seconds(), together.Seconds(), produce.Seconds(), slowest.Seconds())
	}
}

// BenchmarkPartitions drains the same backlog of BENCH_PARTITION_EVENTS
// OrderPaid events (30 000) with inventory, points and notification, each
// alone, on suites whose topics have 64, 128 and 256 partitions, and prints
// each drain rate and each process's peak resident memory: the figure
// behind the partition count of make run (docs/decisions.md, 64 partitions
// kept).
func BenchmarkPartitions(b *testing.B) {
	set := loadSettings(b)
	for _, p := range []int32{64, 128, 256} {
		b.Run(fmt.Sprintf("partitions=%d", p), func(b *testing.B) {
			s := harness.Start(b, harness.Options{Partitions: p, Env: suiteEnv(b)})
			seedLimitStock(s)
			b.ResetTimer()
			for i := range b.N {
				for _, c := range consumerServices {
					s.Stop(c)
				}
				bareProduce(b, s.Broker.Addrs(), s.Topic, limitRecords(b, limitBacklog(s, fmt.Sprintf("p%d-%d", p, i), set.PartitionEvents)))
				for _, c := range consumerServices {
					d := serviceDrain(b, s, c, set.PartitionEvents, "")
					s.Stop(c)
					b.ReportMetric(d.rate, c+"-events/s")
					b.ReportMetric(d.peakRSS/(1<<20), c+"-peak-rss-MiB")
				}
			}
		})
	}
}

// seedLimitStock gives the backlogs' SKUs enough stock for every event.
func seedLimitStock(s *harness.Suite) {
	for k := range consumerSKUs {
		s.SetStock(fmt.Sprintf("SKU-LIM-%d", k), 1_000_000_000)
	}
}

// limitBacklog is n OrderPaid events of run, one per order, over
// consumerSKUs SKUs.
func limitBacklog(s *harness.Suite, run string, n int) []event.Envelope {
	envs := make([]event.Envelope, n)
	for j := range envs {
		envs[j] = s.Events(fmt.Sprintf("O-%s-%06d", run, j), fmt.Sprintf("SKU-LIM-%d", j%consumerSKUs), 1, "10.00").Paid()
	}
	return envs
}

// limitRecords are envs as the services' outbox relays write them: keyed
// by order, the envelope as value, its headers.
func limitRecords(b *testing.B, envs []event.Envelope) []*kgo.Record {
	b.Helper()
	recs := make([]*kgo.Record, len(envs))
	for i, env := range envs {
		raw, err := env.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		var headers []kgo.RecordHeader
		for k, v := range env.Headers() {
			headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		recs[i] = &kgo.Record{Key: []byte(env.AggregateID), Value: raw, Headers: headers}
	}
	return recs
}

// bareProduce produces recs to topic with franz-go alone and returns the
// time until the broker has acknowledged every one. franz-go hashes keys
// with Kafka's murmur2, as the services' publisher does.
func bareProduce(b *testing.B, brokers []string, topic string, recs []*kgo.Record) time.Duration {
	b.Helper()
	took, err := produceRecords(brokers, topic, recs)
	if err != nil {
		b.Fatal(err)
	}
	return took
}

// produceRecords is bareProduce for any goroutine: it returns its error.
func produceRecords(brokers []string, topic string, recs []*kgo.Record) (time.Duration, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.MaxBufferedRecords(len(recs)), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limitTimeout)
	defer cancel()
	var failed atomic.Int64
	start := time.Now()
	for _, r := range recs {
		rec := &kgo.Record{Key: r.Key, Value: r.Value, Headers: r.Headers}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if f := failed.Load(); f > 0 {
		return 0, fmt.Errorf("%d of %d records not produced", f, len(recs))
	}
	return took, nil
}

// bareRouter drains n records of topic through a Watermill router whose
// handler does nothing, over pkg/messaging's subscriber, and returns the
// events per second from the first message handled to the n-th.
func bareRouter(b *testing.B, brokers []string, topic string, n int) float64 {
	b.Helper()
	sub, err := messaging.NewSubscriber(messaging.DefaultSubscriberConfig(brokers, postgrestest.UniqueName("bare-router")), watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	var handled atomic.Int64
	var first atomic.Int64
	done := make(chan time.Time, 1)
	router.AddConsumerHandler("bare", topic, sub, func(*message.Message) error {
		k := handled.Add(1)
		if k == 1 {
			first.Store(time.Now().UnixNano())
		}
		if k == int64(n) {
			done <- time.Now()
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return router.Run(ctx) })
	var last time.Time
	select {
	case last = <-done:
	case <-time.After(limitTimeout):
		b.Fatalf("the bare router handled %d of %d records in %s", handled.Load(), n, limitTimeout)
	}
	cancel()
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return float64(n-1) / last.Sub(time.Unix(0, first.Load())).Seconds()
}

// bareSQLApply writes, for every event, a dedup row and one effect row
// with plain SQL, in transactions of limitSQLBatch events over
// limitSQLWorkers connections, into a fresh database shaped like a
// consumer's, and returns events per second.
func bareSQLApply(b *testing.B, envs []event.Envelope) float64 {
	b.Helper()
	db, _ := postgrestest.NewDatabase(b)
	db.SetMaxOpenConns(limitSQLWorkers)
	db.MustExec(`CREATE TABLE processed_events (
		consumer TEXT NOT NULL, event_id TEXT NOT NULL, processed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
		outcome TEXT NOT NULL DEFAULT 'APPLIED', duplicates INT NOT NULL DEFAULT 0, PRIMARY KEY (consumer, event_id));
		CREATE TABLE effects (order_id TEXT PRIMARY KEY, sku TEXT NOT NULL, quantity INT NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())`)
	batches := make(chan []event.Envelope, len(envs)/limitSQLBatch+1)
	for from := 0; from < len(envs); from += limitSQLBatch {
		batches <- envs[from:min(from+limitSQLBatch, len(envs))]
	}
	close(batches)
	ctx, cancel := context.WithTimeout(context.Background(), limitTimeout)
	defer cancel()
	start := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	for range limitSQLWorkers {
		g.Go(func() error {
			for batch := range batches {
				if err := applyBare(ctx, db, batch); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return float64(len(envs)) / time.Since(start).Seconds()
}

// applyBare is one batch's transaction: the dedup rows, then the effects of
// the events that were new, ids sorted so concurrent batches lock in one
// order.
func applyBare(ctx context.Context, db *sqlx.DB, batch []event.Envelope) error {
	ids := make([]string, len(batch))
	orders := make([]string, len(batch))
	for i, env := range batch {
		ids[i], orders[i] = env.EventID, env.AggregateID
	}
	sort.Strings(ids)
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `INSERT INTO processed_events (consumer, event_id)
		SELECT 'bare', unnest($1::text[]) ON CONFLICT DO NOTHING`, pq.Array(ids)); err != nil {
		return fmt.Errorf("dedup rows: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO effects (order_id, sku, quantity)
		SELECT unnest($1::text[]), 'SKU', 1 ON CONFLICT DO NOTHING`, pq.Array(orders)); err != nil {
		return fmt.Errorf("effects: %w", err)
	}
	return tx.Commit()
}

// drained is what serviceDrain measured of one consumer's drain.
type drained struct {
	// rate is events per second from the first applied to the n-th, as
	// the consumer's count of events handled (appliedCount) shows them.
	rate float64
	// peakRSS is the highest resident memory its process reported, in
	// bytes; peakHeap, peakStacks and peakGoroutines are its Go heap in
	// use, its goroutine stacks and its goroutines at that moment: what
	// the resident memory is made of.
	peakRSS, peakHeap, peakStacks, peakGoroutines float64
	// cpuPerEvent is the CPU time its process spent from its start to the
	// drain's end, per event, in microseconds.
	cpuPerEvent float64
	// meanBatch is the events it applied per transaction: what the
	// statements and the commit of a batch are shared by.
	meanBatch float64
}

// serviceDrain starts service, whose backlog holds n events it has not
// applied, and measures its drain. With profileDir set it also keeps a CPU
// profile of the drain's first profileSeconds there, as <service>.pprof.
func serviceDrain(b *testing.B, s *harness.Suite, service string, n int, profileDir string) drained {
	b.Helper()
	var d drained
	before := map[string]int{service: processedCount(b, s, service)}
	var extra map[string]string
	if profileDir != "" {
		extra = map[string]string{"PPROF_ENABLED": "true"}
	}
	s.StartService(service, extra)
	cpu0 := s.Metric(service, "process_cpu_seconds_total", nil)
	profiled := make(chan error, 1)
	first, last := drainClock(b, s, []string{service}, n, before, func(started bool) {
		if rss := s.Metric(service, "process_resident_memory_bytes", nil); rss > d.peakRSS {
			d.peakRSS = rss
			d.peakHeap = s.Metric(service, "go_memstats_heap_inuse_bytes", nil)
			d.peakStacks = s.Metric(service, "go_memstats_stack_inuse_bytes", nil)
			d.peakGoroutines = s.Metric(service, "go_goroutines", nil)
		}
		if started && profileDir != "" {
			go func() { profiled <- keepProfile(s, service, profileDir) }()
		}
	})
	cpu := s.Metric(service, "process_cpu_seconds_total", nil) - cpu0
	if profileDir != "" {
		if err := <-profiled; err != nil {
			b.Fatal(err)
		}
	}
	d.rate = float64(n) / last.Sub(first).Seconds()
	d.cpuPerEvent = cpu / float64(n) * 1e6
	// The histogram counts the batches gathered, each applied in one
	// transaction unless it failed.
	d.meanBatch = appliedCount(s, service) / s.Metric(service, "consumer_batch_size", nil)
	return d
}

// groupDrain starts services at once, whose backlog holds n events none of
// them has applied, and returns the span from the first event any of them
// applied until every one has applied all n.
func groupDrain(b *testing.B, s *harness.Suite, services []string, n int) time.Duration {
	b.Helper()
	before := map[string]int{}
	for _, c := range services {
		before[c] = processedCount(b, s, c)
	}
	s.StartServices(services...)
	first, last := drainClock(b, s, services, n, before, nil)
	return last.Sub(first)
}

// drainClock polls services every limitPollEvery until each has applied n
// events beyond the before dedup rows it had, and returns the poll that
// first saw any of them apply an event and the poll that saw them all
// done. A service is done when its count of events handled (appliedCount)
// reaches n and then its dedup rows, counted once, say so: the count may
// hold a redelivery. sample, when not nil, runs at every poll, told
// whether this poll is the first to see an event applied.
func drainClock(b *testing.B, s *harness.Suite, services []string, n int, before map[string]int, sample func(started bool)) (first, last time.Time) {
	b.Helper()
	tick := time.NewTicker(limitPollEvery)
	defer tick.Stop()
	deadline := time.After(limitTimeout)
	for {
		select {
		case seen := <-tick.C:
			started, done := false, true
			for _, c := range services {
				applied := appliedCount(s, c)
				if applied > 0 && first.IsZero() {
					first, started = seen, true
				}
				done = done && applied >= float64(n)
			}
			if sample != nil {
				sample(started)
			}
			if !done {
				continue
			}
			for _, c := range services {
				done = done && processedCount(b, s, c) >= before[c]+n
			}
			if done {
				return first, seen
			}
		case <-deadline:
			b.Fatalf("%v did not all apply %d events in %s", services, n, limitTimeout)
			return first, first
		}
	}
}

// appliedCount is the events a consumer process has handled since its
// start, each counted once its transaction committed
// (consumer_messages_total, outcome ok). Counting its dedup rows instead
// scanned a table of a hundred thousand rows ten times a second, which
// took a quarter of a core from the very drain it timed.
func appliedCount(s *harness.Suite, service string) float64 {
	return s.Metric(service, "consumer_messages_total", map[string]string{"outcome": "ok"})
}

// profileSeconds is how long a drain's CPU profile runs: shorter than the
// quickest consumer's drain of the default backlog, so that it holds
// only the drain.
const profileSeconds = 4

// keepProfile writes service's CPU profile of the next profileSeconds to
// dir/<service>.pprof, and then what it allocated since its start to
// dir/<service>.allocs.pprof.
func keepProfile(s *harness.Suite, service, dir string) error {
	for _, p := range []struct{ file, path string }{
		{service + ".pprof", fmt.Sprintf("/admin/debug/pprof/profile?seconds=%d", profileSeconds)},
		{service + ".allocs.pprof", "/admin/debug/pprof/allocs"},
	} {
		file, path := p.file, p.path
		code, raw := s.Call(service, http.MethodGet, path, nil)
		if code != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", service, path, code, raw)
		}
		if err := os.WriteFile(filepath.Join(dir, file), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkScaleOut drains BENCH_PARTITION_EVENTS OrderPaid events (30 000)
// with inventory, points and notification running 1, then 2, then 3
// instances each, in one suite, and prints the drain rate at each count
// (scale-N-events/s: events over the span from the start of the produce
// until all three groups committed every record), each consumer's own
// (scale-N-<service>-events/s, until its group did), the CPU its instances
// spent per event (scale-N-<service>-cpu-us/event), the events they applied
// per batch (scale-N-<service>-events/batch) and this machine's busy CPU
// share during it (scale-N-cpu). Each group has settled with its
// members before the backlog is published, so the figures are steady
// state; what a rebalance in the middle of a drain costs is the backlog
// drill's figure.
func BenchmarkScaleOut(b *testing.B) {
	set := loadSettings(b)
	n := set.PartitionEvents
	s := harness.Start(b, harness.Options{Partitions: messaging.Partitions, Env: suiteEnv(b)})
	seedLimitStock(s)
	adm := newAdmin(b, s.Broker)
	b.ResetTimer()
	for i := range b.N {
		for _, k := range []int{1, 2, 3} {
			for _, c := range consumerServices {
				if err := s.Scale(c, k); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range consumerServices {
				waitMembers(b, adm, harness.Consumers[c], k)
			}
			before := acrossInstances(b, s, consumerServices)
			recs := limitRecords(b, limitBacklog(s, fmt.Sprintf("s%d-%d", i, k), n))
			busy0, total0, ok0 := backlog.CPUTimes()
			// The consumers start on the first records the broker takes,
			// so the drain is timed from the start of the produce, which
			// runs while their progress is polled.
			start := time.Now()
			var (
				produced errgroup.Group
				finished atomic.Bool
			)
			produced.Go(func() error {
				_, err := produceRecords(s.Broker.Addrs(), s.Topic, recs)
				finished.Store(err == nil)
				return err
			})
			done := map[string]time.Duration{}
			cpu := map[string]float64{}
			tick := time.NewTicker(limitPollEvery)
			for len(done) < len(consumerServices) {
				<-tick.C
				took := time.Since(start)
				if took > limitTimeout {
					b.Fatalf("%d instances each did not drain %d events in %s", k, n, limitTimeout)
				}
				if !finished.Load() {
					continue
				}
				// A group is done when it has committed every record: its
				// lag, which the broker answers whatever the number of
				// instances, so polling costs the same at every count.
				for _, c := range consumerServices {
					if _, ok := done[c]; ok || groupLag(b, adm, harness.Consumers[c]) > 0 {
						continue
					}
					done[c] = took
					cpu[c] = acrossInstances(b, s, []string{c})[c].cpuSeconds - before[c].cpuSeconds
				}
			}
			tick.Stop()
			if err := produced.Wait(); err != nil {
				b.Fatal(err)
			}
			after := acrossInstances(b, s, consumerServices)
			for _, c := range consumerServices {
				if got := after[c].applied - before[c].applied; got < float64(n) {
					b.Fatalf("%s's %d instances committed the backlog having applied %.0f of its %d events", c, k, got, n)
				}
			}
			busy1, total1, ok1 := backlog.CPUTimes()
			if !ok0 || !ok1 {
				b.Fatal("this machine's CPU time cannot be read (/proc/stat)")
			}
			b.ReportMetric(float64(n)/slices.Max(slices.Collect(maps.Values(done))).Seconds(), fmt.Sprintf("scale-%d-events/s", k))
			for _, c := range consumerServices {
				b.ReportMetric(float64(n)/done[c].Seconds(), fmt.Sprintf("scale-%d-%s-events/s", k, c))
				b.ReportMetric(cpu[c]/float64(n)*1e6, fmt.Sprintf("scale-%d-%s-cpu-us/event", k, c))
				b.ReportMetric((after[c].applied-before[c].applied)/(after[c].batches-before[c].batches), fmt.Sprintf("scale-%d-%s-events/batch", k, c))
			}
			b.ReportMetric((busy1-busy0)/(total1-total0), fmt.Sprintf("scale-%d-cpu", k))
		}
		for _, c := range consumerServices {
			if err := s.Scale(c, 1); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// instanceTotals sums counters over the running instances of a service.
type instanceTotals struct {
	// applied counts the events handled without error.
	applied float64
	// cpuSeconds is the CPU time the instances' processes spent.
	cpuSeconds float64
	// batches counts the batches their batch processors gathered.
	batches float64
}

// acrossInstances sums the counters of every running instance of
// services, read from their /metrics.
func acrossInstances(b *testing.B, s *harness.Suite, services []string) map[string]instanceTotals {
	b.Helper()
	totals := map[string]instanceTotals{}
	for _, service := range services {
		var sum instanceTotals
		for _, in := range s.Instances(service) {
			resp, err := http.Get(in.URL + "/metrics")
			if err != nil {
				b.Fatalf("%s /metrics: %v", in.Name, err)
			}
			raw, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				b.Fatalf("%s /metrics: %v", in.Name, err)
			}
			applied, err := suiteapi.SumSamples(bytes.NewReader(raw), "consumer_messages_total", map[string]string{"outcome": "ok"})
			if err != nil {
				b.Fatalf("%s /metrics: %v", in.Name, err)
			}
			cpu, err := suiteapi.SumSamples(bytes.NewReader(raw), "process_cpu_seconds_total", nil)
			if err != nil {
				b.Fatalf("%s /metrics: %v", in.Name, err)
			}
			batches, err := suiteapi.SumSamples(bytes.NewReader(raw), "consumer_batch_size", nil)
			if err != nil {
				b.Fatalf("%s /metrics: %v", in.Name, err)
			}
			sum.applied += applied
			sum.cpuSeconds += cpu
			sum.batches += batches
		}
		totals[service] = sum
	}
	return totals
}

// groupLag is the records of the suite's topic that group has not
// committed.
func groupLag(b *testing.B, adm *kadm.Client, group string) int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		b.Fatalf("lag of %s: %v", group, err)
	}
	l := lags[group]
	if err := errors.Join(l.DescribeErr, l.FetchErr); err != nil {
		b.Fatalf("lag of %s: %v", group, err)
	}
	return l.Lag.Total()
}

// waitMembers waits until group is stable with members members, each
// owning partitions.
func waitMembers(b *testing.B, adm *kadm.Client, group string, members int) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		groups, err := adm.DescribeGroups(ctx, group)
		cancel()
		g, ok := groups[group]
		if err == nil && ok && g.State == "Stable" && len(g.Members) == members {
			owning := 0
			for _, m := range g.Members {
				if a, ok := m.Assigned.AsConsumer(); ok && len(a.Topics) > 0 {
					owning++
				}
			}
			if owning == members {
				return
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("group %s did not settle with %d members: %v", group, members, err)
		}
	}
}
