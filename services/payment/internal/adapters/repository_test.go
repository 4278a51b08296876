package adapters_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

func newDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, outbox.Schema(),
		postgres.MigrationSet{Name: "payment", FS: os.DirFS("../../migrations")})
	return db
}

func request(t *testing.T, orderID, amount string) payment.Request {
	t.Helper()
	r, err := payment.NewRequest(orderID, amount, "CNY")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func count(t *testing.T, db *sqlx.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Get(&n, query, args...); err != nil {
		t.Fatal(err)
	}
	return n
}

// wakes counts the relay wakes of a repository.
type wakes struct{ n atomic.Int64 }

func (w *wakes) Wake() { w.n.Add(1) }

// TestCreateConcurrently races ten different new payments of one order
// straight into the insert: exactly one wins, all see its id, and the
// relay is woken once, for the winner's callback.
func TestCreateConcurrently(t *testing.T) {
	db := newDB(t)
	relay := &wakes{}
	repo := adapters.NewRepository(db, relay)
	const n = 10
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p payment.Payment
			p, created[i], errs[i] = repo.Create(context.Background(), payment.New(request(t, "O-1", "80.00")), 2)
			ids[i] = p.ID
		}()
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Create %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("Create %d returned %s, another %s", i, ids[i], ids[0])
		}
		if created[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d creators, want 1", winners)
	}
	if got := count(t, db, `SELECT count(*) FROM payments WHERE order_id = 'O-1'`); got != 1 {
		t.Fatalf("%d payment rows, want 1", got)
	}
	if got := count(t, db, `SELECT count(*) FROM outbox_events WHERE aggregate_id = 'O-1'`); got != 1 {
		t.Fatalf("%d callback rows, want 1", got)
	}
	if got := relay.n.Load(); got != 1 {
		t.Fatalf("relay woken %d times, want once", got)
	}
}

func TestByOrderNotFound(t *testing.T) {
	repo := adapters.NewRepository(newDB(t), nil)
	if _, err := repo.ByOrder(context.Background(), "O-none"); !errors.Is(err, payment.ErrPaymentNotFound) {
		t.Fatalf("ByOrder = %v, want ErrPaymentNotFound", err)
	}
}

func TestCreateKeepsAmounts(t *testing.T) {
	repo := adapters.NewRepository(newDB(t), nil)
	p, created, err := repo.Create(context.Background(), payment.New(request(t, "O-1", "1234567890123456.78")), 2)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if p.Amount.StringFixed(2) != "1234567890123456.78" || p.Status != payment.StatusSucceeded || !p.Refunded.IsZero() ||
		p.CreatedAt.IsZero() {
		t.Fatalf("stored %+v", p)
	}
}

// TestRefundWakesTheRelayOnceCommitted: a refund's callback wakes the
// relay once the unit of work that wrote it has committed, in the
// consumer's unit of work and in one of the repository's own
// (InUnitOfWork) alike, and never when that unit of work is rolled back.
func TestRefundWakesTheRelayOnceCommitted(t *testing.T) {
	ctx := context.Background()
	rolledBack := errors.New("rolled back")
	tests := []struct {
		name      string
		refund    func(refunds *app.Refunds, db *sqlx.DB, req payment.RefundRequest) error
		wantWakes int64
		wantRows  int
	}{
		{"the consumer's unit of work", func(refunds *app.Refunds, db *sqlx.DB, req payment.RefundRequest) error {
			return versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
				_, err := refunds.Refund(ctx, uow, req)
				return err
			})
		}, 1, 1},
		{"a rolled-back unit of work", func(refunds *app.Refunds, db *sqlx.DB, req payment.RefundRequest) error {
			err := versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
				if _, err := refunds.Refund(ctx, uow, req); err != nil {
					return err
				}
				return rolledBack
			})
			if errors.Is(err, rolledBack) {
				return nil
			}
			return err
		}, 0, 0},
		{"the repository's own unit of work", func(refunds *app.Refunds, _ *sqlx.DB, req payment.RefundRequest) error {
			_, err := refunds.RefundPayment(ctx, req)
			return err
		}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := newDB(t)
			relay := &wakes{}
			repo := adapters.NewRepository(db, relay)
			p, _, err := repo.Create(ctx, payment.New(request(t, "O-1", "80.00")), 2)
			if err != nil {
				t.Fatal(err)
			}
			relay.n.Store(0)
			req := payment.RefundRequest{RefundID: "R-1", OrderID: "O-1", PaymentID: p.ID,
				Amount: decimal.RequireFromString("30.00"), Currency: "CNY", OrderVersion: 5}
			if err := tt.refund(app.NewRefunds(repo), db, req); err != nil {
				t.Fatalf("refund: %v", err)
			}
			if got := relay.n.Load(); got != tt.wantWakes {
				t.Errorf("relay woken %d times, want %d", got, tt.wantWakes)
			}
			// The payment's callback, and the refund's if it committed.
			if got := count(t, db, `SELECT count(*) FROM outbox_events WHERE aggregate_id = 'O-1'`); got != 1+tt.wantRows {
				t.Errorf("%d callback rows, want %d", got, 1+tt.wantRows)
			}
		})
	}
}
