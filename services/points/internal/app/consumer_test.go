package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/points/internal/app"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

const consumerName = "points-service"

type fixture struct {
	db   *sqlx.DB
	repo *adapters.Repository
	proc *inbox.Processor
	fp   *failpoint.Registry
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(),
		postgres.MigrationSet{Name: "points", FS: os.DirFS("../../migrations")})
	fp := consumertest.FailPoints(t, app.FailPoint)
	repo := adapters.NewRepository(db, consumerName)
	c := app.NewConsumer(repo, fp, slog.New(slog.DiscardHandler))
	proc := inbox.NewProcessor(db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))
	return fixture{db: db, repo: repo, proc: proc, fp: fp}
}

// entries lists an order's ledger as "TYPE points amount", in order.
func (f fixture) entries(t *testing.T, orderID string) []string {
	t.Helper()
	es, err := f.repo.Entries(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s %d %s", e.Type, e.Points, e.Amount.StringFixed(2))
	}
	return out
}

func (f fixture) state(t *testing.T, orderID string) points.State {
	t.Helper()
	s, err := f.repo.State(context.Background(), orderID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		events    func(t *testing.T, orderID string) []event.Envelope
		wantState points.State
		want      []string
	}{
		{
			name: "the same OrderPaid twice earns once",
			events: func(t *testing.T, id string) []event.Envelope {
				e := consumertest.OrderPaid(t, id, "80.00", consumertest.Item("SKU-1", 1))
				return []event.Envelope{e, e}
			},
			wantState: points.StateEarned,
			want:      []string{"EARN 80 80.00"},
		},
		{
			name: "points round down",
			events: func(t *testing.T, id string) []event.Envelope {
				return []event.Envelope{consumertest.OrderPaid(t, id, "80.99", consumertest.Item("SKU-1", 1))}
			},
			wantState: points.StateEarned,
			want:      []string{"EARN 80 80.99"},
		},
		{
			name: "refund before paid applies both in order",
			events: func(t *testing.T, id string) []event.Envelope {
				return []event.Envelope{consumertest.OrderRefunded(t, id, 5, "30.50", "30.50", nil, nil),
					consumertest.OrderPaid(t, id, "80.00", consumertest.Item("SKU-1", 1))}
			},
			wantState: points.StatePartiallyReversed,
			want:      []string{"EARN 80 80.00", "REVERSAL -31 30.50"},
		},
		{
			// The case: 0.01 of 20.00 leaves 19.99 paid, 19 points.
			name: "a cent back, then the rest",
			events: func(t *testing.T, id string) []event.Envelope {
				return []event.Envelope{consumertest.OrderPaid(t, id, "20.00", consumertest.Item("SKU-1", 1)),
					consumertest.OrderRefunded(t, id, 5, "0.01", "0.01", nil, nil), consumertest.OrderRefunded(t, id, 7, "19.99", "20.00", nil, nil)}
			},
			wantState: points.StateReversed,
			want:      []string{"EARN 20 20.00", "REVERSAL -1 0.01", "REVERSAL -19 19.99"},
		},
		{
			name: "the latest refund covers an earlier one never applied",
			events: func(t *testing.T, id string) []event.Envelope {
				return []event.Envelope{consumertest.OrderPaid(t, id, "20.00", consumertest.Item("SKU-1", 1)),
					consumertest.OrderRefunded(t, id, 7, "5.00", "10.50", nil, nil), consumertest.OrderRefunded(t, id, 5, "5.50", "5.50", nil, nil)}
			},
			wantState: points.StatePartiallyReversed,
			want:      []string{"EARN 20 20.00", "REVERSAL -11 10.50"},
		},
		{
			name: "a refund of more than was paid reverses what was earned, no more",
			events: func(t *testing.T, id string) []event.Envelope {
				return []event.Envelope{consumertest.OrderPaid(t, id, "10.00", consumertest.Item("SKU-1", 1)),
					consumertest.OrderRefunded(t, id, 5, "20.00", "20.00", nil, nil)}
			},
			wantState: points.StateReversed,
			want:      []string{"EARN 10 10.00", "REVERSAL -10 20.00"},
		},
	}
	f := newFixture(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("O-%d", i)
			for _, env := range tt.events(t, id) {
				consumertest.Apply(t, f.proc, env)
			}
			if got := f.state(t, id); got != tt.wantState {
				t.Fatalf("state = %s, want %s", got, tt.wantState)
			}
			if got := f.entries(t, id); !slices.Equal(got, tt.want) {
				t.Fatalf("entries = %v, want %v", got, tt.want)
			}
		})
	}
	balance, err := f.repo.Balance(context.Background(), "C-1")
	if want := int64(80 + 80 + 49 + 0 + 9 + 0); err != nil || balance != want {
		t.Fatalf("customer balance = %d (%v), want %d", balance, err, want)
	}
}

func TestFailPointRollsBackAndRetrySucceeds(t *testing.T) {
	f := newFixture(t)
	if err := f.fp.Set(app.FailPoint, failpoint.ActionError, 1); err != nil {
		t.Fatal(err)
	}
	env := consumertest.OrderPaid(t, "O-1", "80.00", consumertest.Item("SKU-1", 1))
	if _, err := f.proc.Process(context.Background(), env); !errors.Is(err, failpoint.ErrInjected) {
		t.Fatalf("first attempt: %v, want the injected failure", err)
	}
	if got := f.entries(t, "O-1"); len(got) != 0 {
		t.Fatalf("entries after failure = %v, want none", got)
	}
	consumertest.Apply(t, f.proc, env)
	if got, want := f.entries(t, "O-1"), []string{"EARN 80 80.00"}; !slices.Equal(got, want) {
		t.Fatalf("entries after retry = %v, want %v", got, want)
	}
	if n := f.fp.Hits(app.FailPoint); n != 1 {
		t.Fatalf("%s fired %d times, want 1 (the retry passes it disarmed)", app.FailPoint, n)
	}
}

// TestLargestAmountEarnsItsPoints pays the largest amount the order
// service accepts: the ledger holds its points instead of dead-lettering
// the payment.
func TestLargestAmountEarnsItsPoints(t *testing.T) {
	f := newFixture(t)
	consumertest.Apply(t, f.proc, consumertest.OrderPaid(t, "O-1", rules.MaxAmount().String(), consumertest.Item("SKU-1", 1)))
	if got, want := f.entries(t, "O-1"), []string{"EARN 9999999999999999 9999999999999999.99"}; !slices.Equal(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
}

// TestBatchOfManyOrders applies payments and then refunds of many orders
// through the batch processor, so the set-based apply writes each batch's
// entries in one statement and reads the refunded orders' points in one
// query; every order must end with exactly its own entries.
func TestBatchOfManyOrders(t *testing.T) {
	const orders = 40
	f := newFixture(t)
	repo := adapters.NewRepository(f.db, consumerName)
	c := app.NewConsumer(repo, f.fp, slog.New(slog.DiscardHandler))
	proc := inbox.NewProcessor(f.db, consumerName, versionguard.NewBatch(consumerName, c.Transitions(), c.Apply))
	bp := inbox.NewBatchProcessor(proc, inbox.BatchConfig{MaxBatch: 16, Linger: 5 * time.Millisecond}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var worker errgroup.Group
	worker.Go(func() error { return bp.Run(ctx) })
	defer func() {
		cancel()
		_ = worker.Wait()
	}()

	for _, phase := range []func(id string) event.Envelope{
		func(id string) event.Envelope {
			return consumertest.OrderPaid(t, id, "80.00", consumertest.Item("SKU-1", 1))
		},
		func(id string) event.Envelope {
			return consumertest.OrderRefunded(t, id, 5, "30.00", "30.00", nil, nil)
		},
	} {
		var g errgroup.Group
		for i := range orders {
			env := phase(fmt.Sprintf("O-%02d", i))
			g.Go(func() error {
				out, err := bp.Process(context.Background(), env)
				if err == nil && out != versionguard.Applied {
					err = fmt.Errorf("%s of %s: %s, want APPLIED", env.EventType, env.AggregateID, out)
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range orders {
		id := fmt.Sprintf("O-%02d", i)
		if got, want := f.entries(t, id), []string{"EARN 80 80.00", "REVERSAL -30 30.00"}; !slices.Equal(got, want) {
			t.Fatalf("ledger of %s = %v, want %v", id, got, want)
		}
	}
	var rows int
	if err := f.db.Get(&rows, `SELECT count(*) FROM points_ledger`); err != nil || rows != 2*orders {
		t.Fatalf("ledger rows = %d (%v), want %d", rows, err, 2*orders)
	}
}
