package adapters_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

const topic = "order-events"

func TestCreateWritesOrderAndOutboxRow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	stored, err := orders(repo).Create(ctx(t), newOrder(t, "O-1"))
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != order.StatusCreated || stored.Version != 1 {
		t.Fatalf("stored %s v%d", stored.Status, stored.Version)
	}
	if status, version := storedStatus(t, db, "O-1"); status != "CREATED" || version != 1 {
		t.Fatalf("row %s v%d", status, version)
	}
	rows := outboxRows(t, db, "O-1")
	if len(rows) != 1 || rows[0].EventType != "OrderCreated" || rows[0].AggregateVersion != 1 || rows[0].Status != "PENDING" {
		t.Fatalf("outbox rows %+v", rows)
	}
	env, err := event.Parse(rows[0].Payload)
	if err != nil {
		t.Fatal(err)
	}
	var data event.OrderCreatedData
	if err := env.DecodeData(&data); err != nil {
		t.Fatal(err)
	}
	if env.EventID != rows[0].EventID || env.Producer != "order-service" || env.AggregateID != "O-1" ||
		data.Amount.String() != "80.50" || len(data.Items) != 2 || data.Items[0].UnitPrice.String() != "40.00" {
		t.Fatalf("envelope %+v data %+v", env, data)
	}

	got, err := repo.Get(ctx(t), "O-1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.SameContent(newOrder(t, "O-1")) || !got.Amount.Equal(dec("80.5")) {
		t.Fatalf("read back %+v", got)
	}
}

func TestCreateAgain(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}

	again, err := orders(repo).Create(ctx(t), newOrder(t, "O-1"))
	if err != nil {
		t.Fatalf("same content: %v", err)
	}
	if again.Status != order.StatusPendingPayment || again.Version != 2 {
		t.Fatalf("repeat returned %s v%d, want the stored PENDING_PAYMENT v2", again.Status, again.Version)
	}

	other := newOrder(t, "O-1")
	other.CustomerID = "C-2"
	if _, err := orders(repo).Create(ctx(t), other); !errors.Is(err, order.ErrExists) {
		t.Fatalf("different content: got %v, want ErrExists", err)
	}
	if n := len(outboxRows(t, db, "O-1")); n != 2 {
		t.Fatalf("%d outbox rows, want 2 (created, checked out)", n)
	}
}

func TestUpdateWritesOrderAndExactlyOneOutboxRow(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	o, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() })
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != order.StatusPendingPayment || o.Version != 2 {
		t.Fatalf("returned %s v%d", o.Status, o.Version)
	}
	if status, version := storedStatus(t, db, "O-1"); status != "PENDING_PAYMENT" || version != 2 {
		t.Fatalf("row %s v%d", status, version)
	}
	rows := outboxRows(t, db, "O-1")
	if len(rows) != 2 || rows[1].EventType != "OrderCheckedOut" || rows[1].AggregateVersion != 2 {
		t.Fatalf("outbox rows %+v", rows)
	}

	// A repeat changes nothing and writes nothing.
	o, err = repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() })
	if err != nil || o.Version != 2 {
		t.Fatalf("repeat: %v v%d", err, o.Version)
	}
	if n := len(outboxRows(t, db, "O-1")); n != 2 {
		t.Fatalf("%d outbox rows after a repeat, want 2", n)
	}
}

func TestUnknownOrder(t *testing.T) {
	t.Parallel()
	repo := adapters.NewRepository(newDB(t), topic, nil, nil)
	if _, err := repo.Get(ctx(t), "O-404"); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("Get: %v", err)
	}
	_, err := repo.Update(ctx(t), "O-404", func(o *order.Order) ([]order.Event, error) { return o.Checkout() })
	if !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("Update: %v", err)
	}
}

// TestFailureAfterOutboxInsertRollsBackBoth fails the transaction after the
// order row was updated and the outbox row inserted: neither may survive.
func TestFailureAfterOutboxInsertRollsBackBoth(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	fp, err := failpoint.New(failpoint.Config{Names: []string{adapters.FailPointBeforeCommit}})
	if err != nil {
		t.Fatal(err)
	}
	repo := adapters.NewRepository(db, topic, fp, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	if err := fp.Set(adapters.FailPointBeforeCommit, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	o, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() })
	if !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("got %v, want the injected failure", err)
	}
	if fp.Hits(adapters.FailPointBeforeCommit) != 1 {
		t.Fatal("the fail point after the outbox insert was not reached")
	}
	if o.Status != order.StatusCreated || o.Version != 1 {
		t.Fatalf("returned %s v%d, want the unchanged order", o.Status, o.Version)
	}
	if status, version := storedStatus(t, db, "O-1"); status != "CREATED" || version != 1 {
		t.Fatalf("row %s v%d after rollback", status, version)
	}
	rows := outboxRows(t, db, "O-1")
	if len(rows) != 1 || rows[0].EventType != "OrderCreated" {
		t.Fatalf("outbox rows after rollback %+v", rows)
	}

	// The same change succeeds once the fault is gone.
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	if n := len(outboxRows(t, db, "O-1")); n != 2 {
		t.Fatalf("%d outbox rows, want 2", n)
	}
}

func TestCreateFailureLeavesNoOrderAndNoEvent(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	fp, err := failpoint.New(failpoint.Config{Names: []string{adapters.FailPointBeforeCommit}, Spec: adapters.FailPointBeforeCommit + "=error*1"})
	if err != nil {
		t.Fatal(err)
	}
	repo := adapters.NewRepository(db, topic, fp, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("got %v", err)
	}
	var n int
	if err := db.Get(&n, `SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM outbox_events)`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows survived a rolled-back create", n)
	}
	if n := fp.Hits(adapters.FailPointBeforeCommit); n != 1 {
		t.Fatalf("%s fired %d times, want 1", adapters.FailPointBeforeCommit, n)
	}
}

// TestClosureErrorChangesNothing: a change that mutates the order and then
// fails leaves the row and the outbox as they were.
func TestClosureErrorChangesNothing(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	_, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) {
		if _, err := o.Checkout(); err != nil {
			return nil, err
		}
		return nil, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if status, version := storedStatus(t, db, "O-1"); status != "CREATED" || version != 1 {
		t.Fatalf("row %s v%d", status, version)
	}
	if n := len(outboxRows(t, db, "O-1")); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
}

func paymentCallback(id string) order.Callback {
	return order.Callback{ID: id, Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1", Amount: dec("80.50"), Currency: "CNY"}
}

func TestApplyCallbackOnceEvenAfterLaterTransitions(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	o, err := orders(repo).ApplyCallback(ctx(t), paymentCallback("E-pay-1"))
	if err != nil || o.Status != order.StatusPaid || o.Version != 3 || o.PaymentID != "P-1" {
		t.Fatalf("first callback: %v %+v", err, o)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) {
		return o.RequestRefund(order.RefundRequest{ID: "R-1", Amount: dec("10")})
	}); err != nil {
		t.Fatal(err)
	}
	o, err = orders(repo).ApplyCallback(ctx(t), paymentCallback("E-pay-1"))
	if err != nil || o.Status != order.StatusRefunding || o.Version != 4 {
		t.Fatalf("duplicate callback: %v %s v%d", err, o.Status, o.Version)
	}
	var processed int
	if err := db.Get(&processed, `SELECT count(*) FROM processed_callbacks WHERE order_id = 'O-1'`); err != nil {
		t.Fatal(err)
	}
	if processed != 1 {
		t.Fatalf("%d processed callbacks, want 1", processed)
	}
	var paid int
	for _, r := range outboxRows(t, db, "O-1") {
		if r.EventType == "OrderPaid" {
			paid++
		}
	}
	if paid != 1 {
		t.Fatalf("%d OrderPaid rows, want 1", paid)
	}
}

func TestRejectedCallbackIsNotRecorded(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	refunded := order.Callback{ID: "E-ref-1", Type: rules.CallbackRefundSucceeded, OrderID: "O-1", PaymentID: "P-1",
		RefundID: "R-never-asked", Amount: dec("1"), Currency: "CNY"}
	o, err := orders(repo).ApplyCallback(ctx(t), refunded)
	var terr *order.TransitionError
	if !errors.As(err, &terr) || o.Status != order.StatusCreated {
		t.Fatalf("got %v, %+v; want a TransitionError from CREATED", err, o)
	}
	var processed int
	if err := db.Get(&processed, `SELECT count(*) FROM processed_callbacks`); err != nil {
		t.Fatal(err)
	}
	if processed != 0 {
		t.Fatalf("a rejected callback was recorded as processed")
	}
}

func TestConcurrentChangesSerialize(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			// Different callback ids: the state rule, not the dedup row,
			// must make all but one a no-op.
			_, errs[i] = orders(repo).ApplyCallback(ctx(t), paymentCallback("E-pay-"+string(rune('a'+i))))
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("callback failed: %v", err)
		}
	}
	var paid int
	for _, r := range outboxRows(t, db, "O-1") {
		if r.EventType == "OrderPaid" {
			paid++
		}
	}
	if status, version := storedStatus(t, db, "O-1"); paid != 1 || status != "PAID" || version != 3 {
		t.Fatalf("%d OrderPaid rows, order %s v%d; want 1, PAID v3", paid, status, version)
	}
}

// TestRefundsAreStoredWithTheOrder round-trips every refund kind and status
// through the database: the order read back tells the same story.
func TestRefundsAreStoredWithTheOrder(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	if _, err := orders(repo).ApplyCallback(ctx(t), paymentCallback("E-pay-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) {
		return o.RequestRefund(order.RefundRequest{ID: "R-1", Items: []order.Line{{SKU: "SKU-1", Quantity: 1}}})
	}); err != nil {
		t.Fatal(err)
	}
	o, err := orders(repo).ApplyCallback(ctx(t), order.Callback{ID: "E-ref-1", Type: rules.CallbackRefundSucceeded, OrderID: "O-1",
		PaymentID: "P-1", RefundID: "R-1", Amount: dec("40"), Currency: "CNY"})
	if err != nil || o.Status != order.StatusPartiallyRefunded {
		t.Fatalf("refund succeeded: %v %+v", err, o)
	}
	// A second payment of the paid order is returned.
	second := paymentCallback("E-pay-2")
	second.PaymentID = "P-2"
	if _, err := orders(repo).ApplyCallback(ctx(t), second); err != nil {
		t.Fatal(err)
	}
	got, err := repo.Get(ctx(t), "O-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != order.StatusPartiallyRefunded || got.Version != 6 || len(got.Refunds) != 2 ||
		!got.RefundedAmount().Equal(dec("40")) || len(got.ReturnedItems()) != 1 || got.ReturnedItems()[0].Quantity != 1 {
		t.Fatalf("stored order %+v", got)
	}
	ret := got.Refunds[1]
	if ret.Kind != order.KindPaymentReturn || ret.PaymentID != "P-2" || ret.Status != order.RefundRequested ||
		!ret.Amount.Equal(dec("80.50")) || ret.Reason != order.ReasonPaidByAnother {
		t.Fatalf("return %+v", ret)
	}
	var refunded string
	if err := db.Get(&refunded, `SELECT refunded_amount::text FROM orders WHERE order_id = 'O-1'`); err != nil || refunded != "40.00" {
		t.Fatalf("refunded_amount %q %v", refunded, err)
	}
}

// wakes counts the relay wakes of a repository.
type wakes struct {
	mu sync.Mutex
	n  int
}

func (w *wakes) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
}

func (w *wakes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// TestRepositoryWakesTheRelayAfterCommittingEvents: the relay is woken
// once for each committed transaction that added outbox rows, and never
// for one that added none (a repeat) or failed.
func TestRepositoryWakesTheRelayAfterCommittingEvents(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	relay := &wakes{}
	repo := adapters.NewRepository(db, topic, nil, relay)
	checkout := func(o *order.Order) ([]order.Event, error) { return o.Checkout() }
	steps := []struct {
		name    string
		do      func() error
		wantErr bool
		want    int
	}{
		{"create", func() error { _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); return err }, false, 1},
		{"create again", func() error { _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); return err }, false, 1},
		{"checkout", func() error { _, err := repo.Update(ctx(t), "O-1", checkout); return err }, false, 2},
		{"checkout again", func() error { _, err := repo.Update(ctx(t), "O-1", checkout); return err }, false, 2},
		{"a failed change", func() error {
			_, err := repo.Update(ctx(t), "O-1", func(*order.Order) ([]order.Event, error) { return nil, errors.New("refused") })
			return err
		}, true, 2},
	}
	for _, s := range steps {
		if err := s.do(); (err != nil) != s.wantErr {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := relay.count(); got != s.want {
			t.Fatalf("after %s: %d wakes, want %d", s.name, got, s.want)
		}
	}
	if rows := outboxRows(t, db, "O-1"); len(rows) != 2 {
		t.Fatalf("%d outbox rows, want 2 (one per wake)", len(rows))
	}
}
