package bench_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// consumerServices are the consumers of OrderPaid whose drain rate is
// measured.
var consumerServices = []string{"inventory", "points", "notification"}

const (
	// consumerSKUs spreads the backlog over a few hot SKUs, as the backlog
	// drill does, so stock rows are contended.
	consumerSKUs = 100
	// publishChunk bounds one produce call.
	publishChunk = 5_000
)

// BenchmarkConsumers drains the same backlog of OrderPaid events twice
// through inventory, points and notification of one suite: first with one
// transaction per event (CONSUMER_BATCH_SIZE=1, the baseline), then with
// the default batching, and prints both drain rates and their ratio.
//
// The baseline gets 24 database connections per consumer instead of the
// default 8 (DB_MAX_CONNS), so its concurrent transactions are bounded by
// the 64 partitions' handlers rather than by the pool: the comparison is
// with the best the per-event mode can do here (three consumers of 24 stay
// below Postgres's 100 connections).
//
// Each mode starts with the three consumers stopped and the backlog on the
// topic; the rate is the backlog over the span from the first event applied
// by any of them to the last, so start-up and rebalancing are not counted
// against either mode. Both ends of the span are commits seen by polling
// (drainWatch): the dedup rows' processed_at is the transaction's start
// (now()), which would leave a whole batch's work out of the last batch's
// time and so flatter the batched mode.
func BenchmarkConsumers(b *testing.B) {
	set := loadSettings(b)
	s := harness.Start(b, harness.Options{Partitions: 64, Env: suiteEnv(b)})
	for k := range consumerSKUs {
		s.SetStock(fmt.Sprintf("SKU-CB-%d", k), 1_000_000_000)
	}
	b.ResetTimer()
	for i := range b.N {
		base := drainRate(b, s, fmt.Sprintf("base%d", i), set.ConsumerEvents,
			map[string]string{"CONSUMER_BATCH_SIZE": "1", "DB_MAX_CONNS": "24"})
		batched := drainRate(b, s, fmt.Sprintf("batch%d", i), set.ConsumerEvents, nil)
		b.ReportMetric(base, "per-event-events/s")
		b.ReportMetric(batched, "batched-events/s")
		b.ReportMetric(batched/base, "ratio")
		b.Logf("%d OrderPaid events drained by inventory, points and notification: one transaction per event %.0f events/s, batched %.0f events/s (%.1f×)",
			set.ConsumerEvents, base, batched, batched/base)
	}
}

// drainRate publishes n OrderPaid events while the consumers are stopped,
// starts them with env added to theirs and returns the events per second
// from the first event applied to the last, as drainWatch sees the commits.
func drainRate(b *testing.B, s *harness.Suite, run string, n int, env map[string]string) float64 {
	b.Helper()
	before := map[string]int{}
	for _, c := range consumerServices {
		s.Stop(c)
		before[c] = processedCount(b, s, c)
	}
	envs := make([]event.Envelope, n)
	for i := range envs {
		envs[i] = s.Events(fmt.Sprintf("O-%s-%06d", run, i), fmt.Sprintf("SKU-CB-%d", i%consumerSKUs), 1, "10.00").Paid()
	}
	for from := 0; from < n; from += publishChunk {
		s.Publish(envs[from:min(from+publishChunk, n)]...)
	}
	ids := make([]string, n)
	for i, env := range envs {
		ids[i] = env.EventID
	}
	// The watchers start before the first consumer does, so its first
	// commit cannot go unseen while the others start.
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	watches := make([]*drainWatch, len(consumerServices))
	var wg sync.WaitGroup
	for i, c := range consumerServices {
		watches[i] = &drainWatch{db: s.DB(c), before: before[c], want: before[c] + n}
		wg.Go(func() { watches[i].run(ctx) })
	}
	for _, c := range consumerServices {
		s.StartService(c, env)
	}
	wg.Wait()
	var first, last time.Time
	for i, w := range watches {
		if w.last.IsZero() {
			b.Fatalf("%s applied %d of the %d events of %s within %v (%d failed polls)",
				consumerServices[i], w.seen-before[consumerServices[i]], n, run, drainTimeout, w.errors)
		}
		if first.IsZero() || w.first.Before(first) {
			first = w.first
		}
		if w.last.After(last) {
			last = w.last
		}
	}
	b.Logf("%s: %d events, first commit seen to last %v (resolution %v); the dedup rows' processed_at (transaction start) spans %v",
		run, n, last.Sub(first).Round(time.Millisecond), drainPollEvery, txStartSpan(b, s, ids).Round(time.Millisecond))
	return float64(n) / last.Sub(first).Seconds()
}

const (
	// drainPollEvery is the resolution of the drain's clock.
	drainPollEvery = 20 * time.Millisecond
	// drainTimeout bounds one mode's drain.
	drainTimeout = 10 * time.Minute
)

// drainWatch counts one consumer's dedup rows every drainPollEvery and
// stamps the start of the poll that first sees more than before (first)
// and the one that sees want (last). A row counts once its transaction has
// committed, so each stamp is late by at most drainPollEvery and never
// early. A plain count, not a look-up of the run's ids: cheap enough that
// polling does not slow down what it measures.
type drainWatch struct {
	db           *sqlx.DB
	before, want int

	first, last time.Time
	seen        int
	errors      int
}

func (w *drainWatch) run(ctx context.Context) {
	tick := time.NewTicker(drainPollEvery)
	defer tick.Stop()
	for {
		at := time.Now()
		if err := w.db.GetContext(ctx, &w.seen, `SELECT count(*) FROM processed_events`); err != nil {
			w.errors++
		} else {
			if w.first.IsZero() && w.seen > w.before {
				w.first = at
			}
			if w.seen >= w.want {
				w.last = at
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// txStartSpan is the span the dedup rows' processed_at gives for ids, over
// every consumer: the transactions' start times, logged beside the commit
// span to show what the commit clock corrects.
func txStartSpan(b *testing.B, s *harness.Suite, ids []string) time.Duration {
	b.Helper()
	var first, last time.Time
	for _, c := range consumerServices {
		var span struct {
			First time.Time `db:"first"`
			Last  time.Time `db:"last"`
		}
		if err := s.DB(c).Get(&span, `SELECT min(processed_at) AS first, max(processed_at) AS last
			FROM processed_events WHERE event_id = ANY($1)`, pq.Array(ids)); err != nil {
			b.Fatal(err)
		}
		if first.IsZero() || span.First.Before(first) {
			first = span.First
		}
		if span.Last.After(last) {
			last = span.Last
		}
	}
	return last.Sub(first)
}

// processedCount is the consumer's dedup row count.
func processedCount(b *testing.B, s *harness.Suite, service string) int {
	b.Helper()
	var n int
	if err := s.DB(service).Get(&n, `SELECT count(*) FROM processed_events`); err != nil {
		b.Fatalf("count %s's processed events: %v", service, err)
	}
	return n
}
