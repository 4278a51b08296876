package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

var errPoison = errors.New("this order's side effect always fails")

// newBatch returns a running batch processor over the effects consumer of
// inbox_test.go; events of aggregate "O-POISON" fail.
func newBatch(t testing.TB, maxBatch int) (*inbox.BatchProcessor, *sqlx.DB) {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), effectsSet)
	guard := versionguard.New("batch", versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}},
		func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
			if env.AggregateID == "O-POISON" {
				return "", errPoison
			}
			_, err := uow.Tx().ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ($1, $2, $3)`,
				env.AggregateID, string(env.EventType), env.AggregateVersion)
			return "PAID", err
		})
	b := inbox.NewBatchProcessor(inbox.NewProcessor(db, "batch", guard), inbox.BatchConfig{MaxBatch: maxBatch, Linger: 2 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("batch processor: %v", err)
		}
	})
	return b, db
}

func TestBatchProcessorAppliesEachEventOnce(t *testing.T) {
	b, db := newBatch(t, 64)
	const orders = 200
	var g errgroup.Group
	g.SetLimit(24) // as many in flight as a consumer with 24 partitions
	var mu sync.Mutex
	outcomes := map[versionguard.Outcome]int{}
	for i := range orders {
		for copy := range 2 { // every event twice
			g.Go(func() error {
				id := fmt.Sprintf("O-%d", i)
				outcome, err := b.Process(context.Background(), env("E-"+id, id, event.OrderPaid, 3))
				if err != nil {
					return fmt.Errorf("copy %d of %s: %w", copy, id, err)
				}
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM effects`); err != nil {
		t.Fatal(err)
	}
	if n != orders || outcomes[versionguard.Applied] != orders || outcomes[inbox.Duplicate] != orders {
		t.Fatalf("%d effects, outcomes %v; want %d effects, %d applied and %d duplicates", n, outcomes, orders, orders, orders)
	}
	// Copies met in one batch and across batches are counted alike.
	var rows, dups int
	if err := db.QueryRow(`SELECT count(*), coalesce(sum(duplicates), 0) FROM processed_events WHERE consumer = 'batch'`).Scan(&rows, &dups); err != nil {
		t.Fatal(err)
	}
	if rows != orders || dups != orders {
		t.Fatalf("%d dedup rows counting %d duplicates, want %d and %d", rows, dups, orders, orders)
	}
}

func TestBatchProcessorIsolatesAFailingEvent(t *testing.T) {
	b, db := newBatch(t, 64)
	var g errgroup.Group
	errs := make([]error, 30)
	for i := range errs {
		g.Go(func() error {
			id := fmt.Sprintf("O-%d", i)
			if i == 7 {
				id = "O-POISON"
			}
			_, errs[i] = b.Process(context.Background(), env("E-"+id, id, event.OrderPaid, 3))
			return nil
		})
	}
	_ = g.Wait()
	for i, err := range errs {
		if (i == 7) != errors.Is(err, errPoison) {
			t.Errorf("event %d: %v", i, err)
		}
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM effects`); err != nil {
		t.Fatal(err)
	}
	if n != 29 {
		t.Fatalf("%d effects, want 29: the poisoned event fails alone", n)
	}
	if c, _ := inbox.Count(context.Background(), db, "batch", "E-O-POISON"); c != 0 {
		t.Fatal("the failing event kept its dedup row")
	}
}

// BenchmarkApply compares one transaction per event with batches over the
// same database, 24 events in flight as from 24 partitions. Run with
// `make bench`; the ratio is the batching gain.
func BenchmarkApply(b *testing.B) {
	for _, maxBatch := range []int{1, 64} {
		b.Run(fmt.Sprintf("maxBatch=%d", maxBatch), func(b *testing.B) {
			bp, _ := newBatch(b, maxBatch)
			var g errgroup.Group
			g.SetLimit(24)
			b.ResetTimer()
			for i := range b.N {
				g.Go(func() error {
					id := fmt.Sprintf("O-%d", i)
					_, err := bp.Process(context.Background(), env("E-"+id, id, event.OrderPaid, 3))
					return err
				})
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// Each transaction's span says what became of each event it carried, and
// fails with the transaction: what the console shows as applied, a
// duplicate recognised, or a failed attempt.
func TestApplySpansSayWhatBecameOfEachEvent(t *testing.T) {
	for _, maxBatch := range []int{1, 64} {
		t.Run(fmt.Sprintf("batch of %d", maxBatch), func(t *testing.T) {
			b, _ := newBatch(t, maxBatch)
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			process := func(e event.Envelope) {
				ctx, span := tp.Tracer("test").Start(context.Background(), "consume")
				defer span.End()
				_, _ = b.Process(ctx, e)
			}
			process(env("E-S1", "O-S1", event.OrderPaid, 3))
			process(env("E-S1", "O-S1", event.OrderPaid, 3))
			process(env("E-S2", "O-POISON", event.OrderPaid, 3))
			var got []string
			for _, s := range rec.Ended() {
				if s.Name() != "inbox apply" {
					continue
				}
				attrs := map[string]string{}
				for _, kv := range s.Attributes() {
					attrs[string(kv.Key)] = kv.Value.String()
				}
				got = append(got, fmt.Sprintf("%s %s %s", attrs[inbox.AttrEventIDs], attrs[inbox.AttrOutcomes], s.Status().Code))
			}
			want := []string{`["E-S1"] ["APPLIED"] Unset`, `["E-S1"] ["DUPLICATE"] Unset`, `["E-S2"] [""] Error`}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("apply spans %q, want %q", got, want)
			}
		})
	}
}
