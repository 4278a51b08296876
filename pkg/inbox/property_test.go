package inbox_test

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// The property test's knobs: INBOX_PROPERTY_SEED replays a run (its seed
// is printed at the start and in every failure), INBOX_PROPERTY_ORDERS
// makes it larger than the 1 000 orders of `make test`.
const (
	seedVar   = "INBOX_PROPERTY_SEED"
	ordersVar = "INBOX_PROPERTY_ORDERS"
)

// partitions is how many workers deliver at once, each one message at a
// time, as a consumer does with one handler per partition.
const partitions = 24

// A ledger consumer that follows an order's whole lifecycle: every event
// type it handles is legal from exactly one state, and no type occurs
// twice in an order, so the only way to apply an order's events is in
// version order, each once. (Skipping to a later event that is legal from
// the current state is the guard's business and versionguard's tests'.)
var ledgerMigration = postgres.MigrationSet{Name: "ledger", FS: fstest.MapFS{"00001_ledger.sql": {Data: []byte(`
-- +goose Up
CREATE TABLE ledger (id BIGSERIAL PRIMARY KEY, aggregate_id TEXT NOT NULL, event_id TEXT NOT NULL, entry TEXT NOT NULL, version BIGINT NOT NULL);
`)}}}

var lifecycleTransitions = versionguard.Transitions{
	event.OrderCreated:         {versionguard.InitialState},
	event.OrderCheckedOut:      {"CREATED"},
	event.OrderPaid:            {"PENDING_PAYMENT"},
	event.OrderCancelled:       {"PENDING_PAYMENT"},
	event.OrderRefundRequested: {"PAID"},
	event.OrderRefunded:        {"REFUNDING"},
	event.OrderRefundRejected:  {"REFUNDING"},
}

var lifecycleNext = map[event.Type]string{
	event.OrderCreated: "CREATED", event.OrderCheckedOut: "PENDING_PAYMENT", event.OrderPaid: "PAID",
	event.OrderCancelled: "CANCELLED", event.OrderRefundRequested: "REFUNDING", event.OrderRefunded: "REFUNDED",
	event.OrderRefundRejected: "REFUND_REJECTED",
}

// ledgerGuard applies a batch set-based, with one statement, as the
// services' consumers do.
func ledgerGuard() *versionguard.Guard {
	return versionguard.NewBatch("ledger", lifecycleTransitions, func(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
		aggs, ids, entries, versions := make([]string, len(batch)), make([]string, len(batch)), make([]string, len(batch)), make([]int64, len(batch))
		states := make([]string, len(batch))
		for i, p := range batch {
			aggs[i], ids[i], entries[i], versions[i] = p.Env.AggregateID, p.Env.EventID, string(p.Env.EventType), p.Env.AggregateVersion
			states[i] = lifecycleNext[p.Env.EventType]
		}
		_, err := uow.Tx().ExecContext(ctx, `
			INSERT INTO ledger (aggregate_id, event_id, entry, version)
			SELECT a, e, t, v FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) WITH ORDINALITY AS u(a, e, t, v, n) ORDER BY n`,
			pq.Array(aggs), pq.Array(ids), pq.Array(entries), pq.Array(versions))
		return states, err
	})
}

// lifecycle is one order's events in order: cancelled before payment,
// paid, refunded, or refused a refund.
func lifecycle(r *rand.Rand, order string) []event.Envelope {
	types := []event.Type{event.OrderCreated, event.OrderCheckedOut}
	switch r.IntN(4) {
	case 0:
		types = append(types, event.OrderCancelled)
	case 1:
		types = append(types, event.OrderPaid)
	case 2:
		types = append(types, event.OrderPaid, event.OrderRefundRequested, event.OrderRefunded)
	case 3:
		types = append(types, event.OrderPaid, event.OrderRefundRequested, event.OrderRefundRejected)
	}
	out := make([]event.Envelope, len(types))
	for i, t := range types {
		out[i] = event.Envelope{EventID: fmt.Sprintf("%s-E%d", order, i+1), EventType: t, AggregateID: order, AggregateVersion: int64(i + 1)}
	}
	return out
}

// delivery is one delivery of an event to one partition's worker; at
// orders the deliveries of a partition.
type delivery struct {
	env event.Envelope
	at  float64
}

// plan spreads every order's events over the partitions: each event is
// delivered one to three times; half the orders' deliveries are shuffled
// (reordered), the others arrive in order with the redeliveries later; an
// order's deliveries go to its own partition, but one in ten goes to
// another (a redelivery to the worker that took the partition over in a
// rebalance, while the first may still be at it). Every partition
// interleaves the orders it holds, each in its planned order.
func plan(r *rand.Rand, events map[string][]event.Envelope, orderIDs []string) [][]delivery {
	queues := make([][]delivery, partitions)
	for i, id := range orderIDs {
		var ds []event.Envelope
		for _, env := range events[id] {
			for range 1 + r.IntN(3) {
				ds = append(ds, env)
			}
		}
		if r.IntN(2) == 0 {
			r.Shuffle(len(ds), func(a, b int) { ds[a], ds[b] = ds[b], ds[a] })
		} else {
			slices.SortStableFunc(ds, func(a, b event.Envelope) int { return int(a.AggregateVersion - b.AggregateVersion) })
			// The first copy of each event in order, the rest after them.
			seen := map[string]bool{}
			var first, rest []event.Envelope
			for _, env := range ds {
				if seen[env.EventID] {
					rest = append(rest, env)
				} else {
					first = append(first, env)
				}
				seen[env.EventID] = true
			}
			ds = slices.Concat(first, rest)
		}
		at := make([]float64, len(ds))
		for j := range at {
			at[j] = r.Float64()
		}
		slices.Sort(at)
		home := i % partitions
		for j, env := range ds {
			p := home
			if r.IntN(10) == 0 {
				p = r.IntN(partitions)
			}
			queues[p] = append(queues[p], delivery{env: env, at: at[j]})
		}
	}
	for _, q := range queues {
		slices.SortStableFunc(q, func(a, b delivery) int {
			switch {
			case a.at < b.at:
				return -1
			case a.at > b.at:
				return 1
			}
			return 0
		})
	}
	return queues
}

// propertySeed is INBOX_PROPERTY_SEED, or a fresh random seed.
func propertySeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv(seedVar); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", seedVar, s)
		}
		return seed
	}
	var b [8]byte
	_, _ = cryptorand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

func propertyOrders(t *testing.T) int {
	t.Helper()
	s := os.Getenv(ordersVar)
	if s == "" {
		return 1000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", ordersVar, s)
	}
	return n
}

// TestPropertyInterleavingsApplyEveryEventOnceInVersionOrder is the
// tutorial's ordering and exactly-once property over the processor the
// services run: 24 partitions deliver concurrently, each one message at a
// time, into the batch processor; events are duplicated, redelivered to
// other partitions and reordered within their order. Whatever the
// interleaving, the result equals the model's (each order's events
// applied once, in version order): the ledger, each order's version and
// state, one non-duplicate outcome per event, nothing parked, nothing
// lost. Batches run with the services' default workers, so two batches
// are in their transactions at once. With batching off (MaxBatch 1) every
// delivery is its own transaction, concurrently; that path runs a tenth of
// the orders.
func TestPropertyInterleavingsApplyEveryEventOnceInVersionOrder(t *testing.T) {
	seed := propertySeed(t)
	orders := propertyOrders(t)
	replay := fmt.Sprintf("%s=%d %s=%d go test -run TestPropertyInterleavingsApplyEveryEventOnceInVersionOrder ./inbox/", seedVar, seed, ordersVar, orders)
	t.Logf("seed %d (replay: %s)", seed, replay)
	for _, tt := range []struct {
		name     string
		maxBatch int
		orders   int
	}{
		{"batched", 256, orders},
		{"batching off", 1, max(1, orders/10)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkInterleavings(t, seed, replay, tt.maxBatch, tt.orders)
		})
	}
}

func checkInterleavings(t *testing.T, seed uint64, replay string, maxBatch, orders int) {
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("seed %d: "+format+" (replay: "+replay+")", append([]any{seed}, args...)...)
	}
	r := rand.New(rand.NewPCG(seed, uint64(maxBatch)))
	events := map[string][]event.Envelope{}
	var orderIDs []string
	for i := range orders {
		id := fmt.Sprintf("O-%d", i)
		orderIDs = append(orderIDs, id)
		events[id] = lifecycle(r, id)
	}
	queues := plan(r, events, orderIDs)

	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), ledgerMigration)
	bp := inbox.NewBatchProcessor(inbox.NewProcessor(db, "ledger", ledgerGuard()), inbox.BatchConfig{MaxBatch: maxBatch, Linger: 2 * time.Millisecond,
		Workers: inbox.DefaultBatchConfig().Workers}, nil)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- bp.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("batch processor: %v", err)
		}
	}()

	// A delivery that fails (a deadlock between two batches, say) is
	// redelivered by its worker, as the broker would.
	var (
		mu        sync.Mutex
		outcomes  = map[string][]versionguard.Outcome{}
		retries   int
		abandoned []string
		wg        sync.WaitGroup
	)
	start := time.Now()
	for _, q := range queues {
		wg.Go(func() {
			for _, d := range q {
				var (
					outcome versionguard.Outcome
					err     error
				)
				for attempt := range 10 {
					if outcome, err = bp.Process(ctx, d.env); err == nil {
						break
					}
					mu.Lock()
					retries++
					mu.Unlock()
					if attempt == 9 {
						mu.Lock()
						abandoned = append(abandoned, fmt.Sprintf("%s: %v", d.env.EventID, err))
						mu.Unlock()
					}
				}
				if err == nil {
					mu.Lock()
					outcomes[d.env.EventID] = append(outcomes[d.env.EventID], outcome)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	deliveries := 0
	for _, q := range queues {
		deliveries += len(q)
	}
	t.Logf("%d orders, %d deliveries over %d partitions in %s, %d redelivered after an error", orders, deliveries, partitions,
		time.Since(start).Round(time.Millisecond), retries)
	if len(abandoned) > 0 {
		fail("%d deliveries failed 10 times: %s", len(abandoned), strings.Join(abandoned[:min(5, len(abandoned))], "; "))
	}

	// Dedup: every event has exactly one outcome that is not DUPLICATE, and
	// it is APPLIED or WAITING_FOR_GAP (nothing is ever stale here: an event
	// is only behind the position after it was applied, and then its dedup
	// row exists).
	counts := map[versionguard.Outcome]int{}
	distinct := 0
	for _, id := range orderIDs {
		for _, env := range events[id] {
			distinct++
			got := outcomes[env.EventID]
			first := 0
			for _, o := range got {
				counts[o]++
				if o != inbox.Duplicate {
					first++
					if o != versionguard.Applied && o != versionguard.WaitingForGap {
						fail("%s: outcome %s", env.EventID, o)
					}
				}
			}
			if first != 1 {
				fail("%s was delivered %d times with outcomes %v: want exactly one that is not %s", env.EventID, len(got), got, inbox.Duplicate)
			}
		}
	}
	t.Logf("outcomes %v for %d events", counts, distinct)
	if counts[inbox.Duplicate] != deliveries-distinct {
		fail("%d %s outcomes, want %d (deliveries %d - events %d)", counts[inbox.Duplicate], inbox.Duplicate, deliveries-distinct, deliveries, distinct)
	}
	var processed int
	if err := db.Get(&processed, `SELECT count(*) FROM processed_events WHERE consumer = 'ledger'`); err != nil {
		t.Fatal(err)
	}
	if processed != distinct {
		fail("%d dedup rows, want one per event: %d", processed, distinct)
	}

	// The model: each order's events applied once, in version order.
	var rows []struct {
		Aggregate string `db:"aggregate_id"`
		Entries   string `db:"entries"`
	}
	if err := db.Select(&rows, `SELECT aggregate_id, string_agg(entry || ':' || version, ',' ORDER BY id) AS entries FROM ledger GROUP BY aggregate_id`); err != nil {
		t.Fatal(err)
	}
	ledger := map[string]string{}
	for _, row := range rows {
		ledger[row.Aggregate] = row.Entries
	}
	positions, err := versionguard.States(context.Background(), db, "ledger", orderIDs)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range orderIDs {
		var want []string
		for _, env := range events[id] {
			want = append(want, fmt.Sprintf("%s:%d", env.EventType, env.AggregateVersion))
		}
		last := events[id][len(events[id])-1]
		if got := ledger[id]; got != strings.Join(want, ",") {
			fail("%s: ledger %q, the model %q", id, got, strings.Join(want, ","))
		}
		wantPos := versionguard.Position{Version: last.AggregateVersion, State: lifecycleNext[last.EventType]}
		if positions[id] != wantPos {
			fail("%s: position %+v, the model %+v", id, positions[id], wantPos)
		}
	}
	if len(ledger) != orders {
		fail("%d orders have a ledger, want %d", len(ledger), orders)
	}
	if parked, err := versionguard.ParkedCount(context.Background(), db, "ledger"); err != nil || parked != 0 {
		fail("%d events still parked (%v), want 0", parked, err)
	}
}
