package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

const consumerName = "inventory-service"

type fixture struct {
	db    *sqlx.DB
	repo  *adapters.Repository
	proc  *inbox.Processor
	fp    *failpoint.Registry
	relay *wakes
}

// wakes counts the relay wakes of a repository.
type wakes struct{ n atomic.Int64 }

func (w *wakes) Wake() { w.n.Add(1) }

func newFixture(t *testing.T) fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), outbox.Schema(),
		postgres.MigrationSet{Name: "inventory", FS: os.DirFS("../../migrations")})
	fp := consumertest.FailPoints(t, app.FailPoint)
	relay := &wakes{}
	repo := adapters.NewRepository(db, relay)
	c := app.NewConsumer(repo, fp, slog.New(slog.DiscardHandler))
	proc := inbox.NewProcessor(db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))
	return fixture{db: db, repo: repo, proc: proc, fp: fp, relay: relay}
}

func (f fixture) setStock(t *testing.T, stock map[string]int) {
	t.Helper()
	for sku, n := range stock {
		if _, err := f.repo.SetAvailable(context.Background(), sku, n); err != nil {
			t.Fatal(err)
		}
	}
}

func (f fixture) stock(t *testing.T, sku string) inventory.Stock {
	t.Helper()
	s, err := f.repo.Stock(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f fixture) status(t *testing.T, orderID string) inventory.Status {
	t.Helper()
	o, err := f.repo.Order(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	return o.Status
}

// movements lists an order's movements as "KIND SKU delta", in order.
func (f fixture) movements(t *testing.T, orderID string) []string {
	t.Helper()
	ms, err := f.repo.Movements(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%s %s %d", m.Kind, m.SKU, m.Delta)
	}
	return out
}

func TestDuplicatePaidDeductsOnce(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10})
	env := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 2))

	if got := consumertest.Apply(t, f.proc, env); got != versionguard.Applied {
		t.Fatalf("first delivery: %s, want APPLIED", got)
	}
	if got := consumertest.Apply(t, f.proc, env); got != inbox.Duplicate {
		t.Fatalf("second delivery: %s, want DUPLICATE", got)
	}
	if s := f.stock(t, "A"); s.Available != 8 || s.Deducted != 2 {
		t.Fatalf("stock = %+v, want available 8 deducted 2", s)
	}
	if got, want := f.movements(t, "O-1"), []string{"DEDUCT A -2"}; !slices.Equal(got, want) {
		t.Fatalf("movements = %v, want %v", got, want)
	}
	if n := f.relay.n.Load(); n != 0 {
		t.Fatalf("relay woken %d times for a deduction without callbacks, want never", n)
	}
}

func TestInsufficientStockRejectsWholeOrder(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 1, "B": 5})

	short := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("B", 1), consumertest.Item("A", 2), consumertest.Item("GHOST", 1))
	consumertest.Apply(t, f.proc, short)
	if got := f.status(t, "O-1"); got != inventory.StatusRejected {
		t.Fatalf("status = %s, want REJECTED", got)
	}
	o, err := f.repo.Order(context.Background(), "O-1")
	if err != nil || o.Reason != inventory.ReasonInsufficientStock {
		t.Fatalf("reason = %q (%v), want %s", o.Reason, err, inventory.ReasonInsufficientStock)
	}
	// The order service is told, in the same transaction, so it gives the
	// money back: one STOCK_REJECTED callback of the paid order's payment.
	var callbacks []struct {
		Type    string `db:"event_type"`
		Payload []byte `db:"payload"`
	}
	if err := f.db.Select(&callbacks, `SELECT event_type, payload FROM outbox_events WHERE aggregate_id = 'O-1'`); err != nil {
		t.Fatal(err)
	}
	if len(callbacks) != 1 || callbacks[0].Type != string(rules.CallbackStockRejected) {
		t.Fatalf("%d callbacks, want one STOCK_REJECTED", len(callbacks))
	}
	var cb event.Callback
	if err := json.Unmarshal(callbacks[0].Payload, &cb); err != nil {
		t.Fatal(err)
	}
	if cb.Type != rules.CallbackStockRejected || cb.OrderID != "O-1" || cb.PaymentID != "P-1" || (cb.Amount == nil || *cb.Amount != "80.00") ||
		cb.Currency != "CNY" || cb.Reason != inventory.ReasonInsufficientStock {
		t.Fatalf("callback %+v", cb)
	}
	// The relay is woken once the transaction has committed the callback,
	// so it leaves at once rather than at the relay's next poll.
	if n := f.relay.n.Load(); n != 1 {
		t.Fatalf("relay woken %d times, want once", n)
	}
	// A refund of a rejected order has nothing to give back.
	back := consumertest.Items(consumertest.Item("A", 2), consumertest.Item("B", 1))
	consumertest.Apply(t, f.proc, consumertest.OrderRefunded(t, "O-1", 5, "80.00", "80.00", back, back))
	if got := f.status(t, "O-1"); got != inventory.StatusRejected {
		t.Fatalf("status after refund = %s, want REJECTED", got)
	}
	if a, b := f.stock(t, "A"), f.stock(t, "B"); a.Available != 1 || b.Available != 5 || a.Deducted+b.Deducted != 0 {
		t.Fatalf("stock moved: A=%+v B=%+v", a, b)
	}
	if got := f.movements(t, "O-1"); len(got) != 0 {
		t.Fatalf("movements = %v, want none", got)
	}
}

func TestRefundBeforePaidAppliesBothInOrder(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10, "B": 10})

	back := consumertest.Items(consumertest.Item("A", 2), consumertest.Item("B", 1))
	early := consumertest.OrderRefunded(t, "O-1", 5, "80.00", "80.00", back, back)
	if got := consumertest.Apply(t, f.proc, early); got != versionguard.WaitingForGap {
		t.Fatalf("early refund: %s, want WAITING_FOR_GAP", got)
	}
	if got := f.status(t, "O-1"); got != inventory.StatusNone {
		t.Fatalf("status after early refund = %s, want NONE", got)
	}
	paid := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 1), consumertest.Item("B", 1), consumertest.Item("A", 1))
	if got := consumertest.Apply(t, f.proc, paid); got != versionguard.Applied {
		t.Fatalf("paid: %s, want APPLIED", got)
	}
	if got := f.status(t, "O-1"); got != inventory.StatusRestocked {
		t.Fatalf("status = %s, want RESTOCKED", got)
	}
	want := []string{"DEDUCT A -2", "DEDUCT B -1", "RESTOCK A 2", "RESTOCK B 1"}
	if got := f.movements(t, "O-1"); !slices.Equal(got, want) {
		t.Fatalf("movements = %v, want %v", got, want)
	}
	for _, sku := range []string{"A", "B"} {
		if s := f.stock(t, sku); s.Available != 10 || s.Deducted != 0 {
			t.Fatalf("stock %s = %+v, want 10 available, 0 deducted", sku, s)
		}
	}
}

func TestRefundRestocksWhatWasDeducted(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10})
	consumertest.Apply(t, f.proc, consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 3)))
	// The refund event lists other quantities; what was deducted is what
	// comes back.
	other := consumertest.Items(consumertest.Item("A", 7))
	consumertest.Apply(t, f.proc, consumertest.OrderRefunded(t, "O-1", 5, "80.00", "80.00", other, other))
	if s := f.stock(t, "A"); s.Available != 10 || s.Deducted != 0 {
		t.Fatalf("stock = %+v, want 10 available, 0 deducted", s)
	}
}

func TestFailPointRollsBackAndRetrySucceeds(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10})
	if err := f.fp.Set(app.FailPoint, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	env := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 2))

	if _, err := f.proc.Process(context.Background(), env); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("first attempt: %v, want the injected failure", err)
	}
	if n, err := inbox.Count(context.Background(), f.db, consumerName, env.EventID); err != nil || n != 0 {
		t.Fatalf("dedup rows after failure = %d (%v), want 0", n, err)
	}
	if s := f.stock(t, "A"); s.Available != 10 {
		t.Fatalf("stock after failure = %+v, want untouched", s)
	}
	consumertest.Apply(t, f.proc, env)
	if s := f.stock(t, "A"); s.Available != 8 || s.Deducted != 2 {
		t.Fatalf("stock after retry = %+v, want 8 available, 2 deducted", s)
	}
	if n := f.fp.Hits(app.FailPoint); n != 1 {
		t.Fatalf("%s fired %d times, want 1 (the retry passes it disarmed)", app.FailPoint, n)
	}
}

// TestConcurrentOrdersOnHotSKUs pays many orders over the same two SKUs at
// once, listing them in opposite orders: no transaction may deadlock, and
// stock is conserved.
func TestConcurrentOrdersOnHotSKUs(t *testing.T) {
	const orders, stock = 24, 15
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": stock, "B": stock})

	var g errgroup.Group
	for i := range orders {
		its := consumertest.Items(consumertest.Item("A", 1), consumertest.Item("B", 1))
		if i%2 == 1 {
			its = consumertest.Items(consumertest.Item("B", 1), consumertest.Item("A", 1))
		}
		env := consumertest.OrderPaid(t, fmt.Sprintf("O-%d", i), "80.00", its...)
		g.Go(func() error {
			_, err := f.proc.Process(context.Background(), env)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("concurrent payments: %v", err)
	}
	var deducted, rejected int
	for i := range orders {
		switch s := f.status(t, fmt.Sprintf("O-%d", i)); s {
		case inventory.StatusDeducted:
			deducted++
		case inventory.StatusRejected:
			rejected++
		default:
			t.Fatalf("order %d: status %s", i, s)
		}
	}
	if deducted != stock || rejected != orders-stock {
		t.Fatalf("deducted %d, rejected %d; want %d and %d", deducted, rejected, stock, orders-stock)
	}
	for _, sku := range []string{"A", "B"} {
		if s := f.stock(t, sku); s.Available != 0 || s.Deducted != stock {
			t.Fatalf("stock %s = %+v, want 0 available, %d deducted", sku, s, stock)
		}
	}
	var rows int
	if err := f.db.Get(&rows, `SELECT count(*) FROM stock_movements`); err != nil || rows != 2*stock {
		t.Fatalf("movement rows = %d (%v), want %d", rows, err, 2*stock)
	}
}

// TestConcurrentBatchesOnHotSKUs runs two batch processors over the same
// database, as two consumer instances during a rebalance, with batches that
// list the same hot SKUs in opposite orders and more orders than stock, so
// batches often find their stock taken after reading it. The stock rows are
// locked in SKU order by one statement, so no batch deadlocks (a deadlock
// would show as a fallback), and stock is conserved.
func TestConcurrentBatchesOnHotSKUs(t *testing.T) {
	const orders, stock = 48, 24
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": stock, "B": stock})
	c := app.NewConsumer(f.repo, f.fp, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	var workers errgroup.Group
	var instances []*inbox.BatchProcessor
	for i := range 2 {
		proc := inbox.NewProcessor(f.db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))
		bp := inbox.NewBatchProcessor(proc, inbox.BatchConfig{MaxBatch: 8, Linger: 2 * time.Millisecond},
			prometheus.WrapRegistererWith(prometheus.Labels{"instance": fmt.Sprint(i)}, reg))
		instances = append(instances, bp)
		workers.Go(func() error { return bp.Run(ctx) })
	}
	var g errgroup.Group
	for i := range orders {
		// Single-SKU orders interleaved, so a batch can touch B before A
		// while another touches A before B.
		its := consumertest.Items(consumertest.Item("A", 1))
		if (i/2)%2 == 1 {
			its = consumertest.Items(consumertest.Item("B", 1))
		}
		env := consumertest.OrderPaid(t, fmt.Sprintf("O-%02d", orders-i), "80.00", its...)
		g.Go(func() error {
			_, err := instances[i%2].Process(context.Background(), env)
			return err
		})
	}
	err := g.Wait()
	cancel()
	_ = workers.Wait()
	if err != nil {
		t.Fatalf("concurrent batches: %v", err)
	}
	families, _ := reg.Gather()
	for _, mf := range families {
		if mf.GetName() == "consumer_batch_fallbacks_total" {
			for _, m := range mf.GetMetric() {
				if m.GetCounter().GetValue() != 0 {
					t.Fatalf("%v batches fell back to one event at a time: a batch failed (deadlock?)", m.GetCounter().GetValue())
				}
			}
		}
	}
	for _, sku := range []string{"A", "B"} {
		if s := f.stock(t, sku); s.Available != 0 || s.Deducted != stock {
			t.Fatalf("stock %s = %+v, want 0 available, %d deducted", sku, s, stock)
		}
	}
}

// TestPartialRefundsRestockExactlyWhatCameBack is the refund model from
// inventory's side: each refund restocks the goods it returned, a refund of
// money alone restocks nothing, and the order is PARTIALLY_RESTOCKED until
// every unit is back.
func TestPartialRefundsRestockExactlyWhatCameBack(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10, "B": 10})
	consumertest.Apply(t, f.proc, consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 3), consumertest.Item("B", 1)))
	oneA := consumertest.Items(consumertest.Item("A", 1))
	steps := []struct {
		env        event.Envelope
		status     inventory.Status
		availableA int
		availableB int
	}{
		{consumertest.OrderRefunded(t, "O-1", 5, "40.00", "40.00", oneA, oneA), inventory.StatusPartiallyRestocked, 8, 9},
		{consumertest.OrderRefunded(t, "O-1", 7, "0.01", "40.01", nil, oneA), inventory.StatusPartiallyRestocked, 8, 9},
		{consumertest.OrderRefunded(t, "O-1", 9, "50.00", "90.01", consumertest.Items(consumertest.Item("A", 2), consumertest.Item("B", 1)),
			consumertest.Items(consumertest.Item("A", 3), consumertest.Item("B", 1))), inventory.StatusRestocked, 10, 10},
	}
	for i, step := range steps {
		if got := consumertest.Apply(t, f.proc, step.env); got != versionguard.Applied {
			t.Fatalf("step %d: %s, want APPLIED", i, got)
		}
		if got := f.status(t, "O-1"); got != step.status {
			t.Fatalf("step %d: status %s, want %s", i, got, step.status)
		}
		if a, b := f.stock(t, "A"), f.stock(t, "B"); a.Available != step.availableA || b.Available != step.availableB {
			t.Fatalf("step %d: stock A=%+v B=%+v, want %d and %d available", i, a, b, step.availableA, step.availableB)
		}
	}
	want := []string{"DEDUCT A -3", "DEDUCT B -1", "RESTOCK A 1", "RESTOCK A 2", "RESTOCK B 1"}
	if got := f.movements(t, "O-1"); !slices.Equal(got, want) {
		t.Fatalf("movements = %v, want %v", got, want)
	}
}

// TestLatestRefundCoversAnEarlierOneNeverApplied: the first refund's event
// was lost (or dead-lettered) and the second arrives: its running total
// brings back both refunds' goods, and the late first one is stale.
func TestLatestRefundCoversAnEarlierOneNeverApplied(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10})
	consumertest.Apply(t, f.proc, consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 3)))
	oneA := consumertest.Items(consumertest.Item("A", 1))
	first := consumertest.OrderRefunded(t, "O-1", 5, "10.00", "10.00", oneA, oneA)
	second := consumertest.OrderRefunded(t, "O-1", 7, "10.00", "20.00", oneA, consumertest.Items(consumertest.Item("A", 2)))
	if got := consumertest.Apply(t, f.proc, second); got != versionguard.Applied {
		t.Fatalf("second refund: %s", got)
	}
	if got := consumertest.Apply(t, f.proc, first); got != versionguard.IgnoredStale {
		t.Fatalf("late first refund: %s, want IGNORED_STALE_EVENT", got)
	}
	if s := f.stock(t, "A"); s.Available != 9 || s.Deducted != 1 {
		t.Fatalf("stock %+v, want 2 of 3 back: 9 available, 1 deducted", s)
	}
}

// TestRefundOfTheFirstReleaseRestocksEverything reads OrderRefunded v1, from
// before partial refunds: the order's one refund returned every item.
func TestRefundOfTheFirstReleaseRestocksEverything(t *testing.T) {
	f := newFixture(t)
	f.setStock(t, map[string]int{"A": 10})
	consumertest.Apply(t, f.proc, consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 3)))
	consumertest.Apply(t, f.proc, consumertest.OrderRefundedV1(t, "O-1", "30.00", consumertest.Item("A", 3)))
	if got := f.status(t, "O-1"); got != inventory.StatusRestocked {
		t.Fatalf("status %s, want RESTOCKED", got)
	}
	if s := f.stock(t, "A"); s.Available != 10 || s.Deducted != 0 {
		t.Fatalf("stock %+v, want all back", s)
	}
}

// takingStore is the repository with another transaction's change of stock
// committed right after the consumer read the stock, before it saves.
type takingStore struct {
	*adapters.Repository
	take func()
}

func (s takingStore) ReadStock(ctx context.Context, uow *versionguard.UnitOfWork, skus []string) (map[string]int, error) {
	available, err := s.Repository.ReadStock(ctx, uow, skus)
	s.take()
	return available, err
}

// TestStockChangedAfterItWasRead pays an order of 4 units of one SKU while
// another transaction sets the SKU's stock between the consumer's read of
// it and its write. The consumer decides on the stock it read and moves
// it only if the stock still covers that; otherwise the transaction runs
// again with the row locked. Either way no unit is sold twice and the
// movements match the stock.
func TestStockChangedAfterItWasRead(t *testing.T) {
	tests := []struct {
		name          string
		read, setTo   int
		want          inventory.Status
		wantAvailable int
	}{
		{"taken below the order's needs: decided again, locked", 10, 3, inventory.StatusRejected, 3},
		{"taken but still covering: moved as decided", 10, 5, inventory.StatusDeducted, 1},
		{"restocked: the rejection stands, decided on the stock as read", 3, 20, inventory.StatusRejected, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.setStock(t, map[string]int{"A": tt.read})
			store := takingStore{Repository: f.repo, take: func() { f.setStock(t, map[string]int{"A": tt.setTo}) }}
			c := app.NewConsumer(store, f.fp, slog.New(slog.DiscardHandler))
			proc := inbox.NewProcessor(f.db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))
			paid := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("A", 4))
			if out, err := proc.Process(context.Background(), paid); err != nil || out != versionguard.Applied {
				t.Fatalf("process = %s, %v; want APPLIED", out, err)
			}
			if got := f.status(t, "O-1"); got != tt.want {
				t.Errorf("O-1 = %s, want %s", got, tt.want)
			}
			wantMoves, deducted := []string{}, 0
			if tt.want == inventory.StatusDeducted {
				wantMoves, deducted = []string{"DEDUCT A -4"}, 4
			}
			if ms := f.movements(t, "O-1"); !slices.Equal(ms, wantMoves) {
				t.Errorf("O-1 movements = %v, want %v", ms, wantMoves)
			}
			if s := f.stock(t, "A"); s.Available != tt.wantAvailable || s.Deducted != deducted {
				t.Errorf("stock A = %+v, want %d available, %d deducted", s, tt.wantAvailable, deducted)
			}
		})
	}
}
