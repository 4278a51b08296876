package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// fixedClock is a clock a test sets: every reading is the time last set.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fixedClock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

// converged is a paid order every service has caught up with.
func converged(id string) rec.Facts {
	f := paidButLost(id)
	f.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}}
	return f
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*app.Config)
		ok   bool
	}{
		{"the defaults", func(*app.Config) {}, true},
		{"a deadline of 0s", func(c *app.Config) { c.Deadline = 0 }, false},
		{"the shortest deadline", func(c *app.Config) { c.Deadline = time.Nanosecond }, true},
		{"pages of 0", func(c *app.Config) { c.PageSize = 0 }, false},
		{"pages of 1", func(c *app.Config) { c.PageSize = 1 }, true},
		{"pages of 1000", func(c *app.Config) { c.PageSize = 1000 }, true},
		{"pages of 1001", func(c *app.Config) { c.PageSize = 1001 }, false},
		{"orphan pages of 0", func(c *app.Config) { c.OrphanPageSize = 0 }, false},
		{"orphan pages of 1", func(c *app.Config) { c.OrphanPageSize = 1 }, true},
		{"orphan pages of 1001", func(c *app.Config) { c.OrphanPageSize = 1001 }, false},
		{"no attempt", func(c *app.Config) { c.MaxAttempts = 0 }, false},
		{"one attempt", func(c *app.Config) { c.MaxAttempts = 1 }, true},
		{"no heartbeat", func(c *app.Config) { c.Heartbeat = 0 }, false},
		{"abandoned after exactly three heartbeats", func(c *app.Config) { c.Heartbeat = time.Second; c.AbandonAfter = 3 * time.Second }, true},
		{"abandoned before three heartbeats", func(c *app.Config) {
			c.Heartbeat = time.Second
			c.AbandonAfter = 3*time.Second - time.Nanosecond
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := app.DefaultConfig()
			tt.edit(&cfg)
			err := cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%+v) = %v, want ok %v", cfg, err, tt.ok)
			}
			_, err = app.NewReconciler(cfg, newServices(), nil, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if (err == nil) != tt.ok {
				t.Fatalf("NewReconciler(%+v) = %v, want ok %v", cfg, err, tt.ok)
			}
		})
	}
}

// TestTheDeadlineDecidesWhatIsStuck: with the clock held still, a message
// pending in the order's or the payment's outbox for exactly the
// convergence deadline is not stuck yet (a run records no finding and
// republishes nothing; a check names it in flight, not converged); a
// microsecond later it is (a run republishes it once, a check names it
// stuck).
func TestTheDeadlineDecidesWhatIsStuck(t *testing.T) {
	const deadline = 30 * time.Second
	for _, service := range []string{rec.ServiceOrder, rec.ServicePayment} {
		t.Run(service, func(t *testing.T) {
			created := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
			f := converged("O-1")
			pending := rec.OutboxRow{EventID: "E-pending", EventType: "OrderPaid", AggregateVersion: 3, Status: "PENDING", Attempts: 2, CreatedAt: created}
			if service == rec.ServiceOrder {
				f.Order.Events[1] = pending
			} else {
				pending.EventType = "PaymentSucceeded"
				f.Payment.Outbox = []rec.OutboxRow{pending}
			}
			svc := newServices(f)
			clock := &fixedClock{now: created.Add(deadline)}
			r, _, _ := newReconcilerAt(t, svc, deadline, clock.Now)
			ctx := context.Background()

			check, err := r.Check(ctx, "O-1")
			if err != nil || check.Converged || len(check.Mismatches) != 1 || check.Mismatches[0].Kind != rec.InFlight || check.Mismatches[0].Service != service {
				t.Fatalf("check at the deadline: %+v, %v; want the %s outbox in flight, not converged", check, err, service)
			}
			run, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
			if err != nil || len(run.Findings) != 0 || run.Actions != 0 || len(svc.taken()) != 0 {
				t.Fatalf("run at the deadline: %v, %d actions, compensations %v, %v; want nothing", outcomes(run), run.Actions, svc.taken(), err)
			}

			clock.Set(created.Add(deadline + time.Microsecond))
			check, err = r.Check(ctx, "O-1")
			if err != nil || check.Converged || len(check.Mismatches) != 1 || check.Mismatches[0].Kind != rec.StuckInOutbox || check.Mismatches[0].Service != service {
				t.Fatalf("check past the deadline: %+v, %v; want the %s outbox stuck", check, err, service)
			}
			run, err = r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
			want := []string{"O-1 STUCK_IN_OUTBOX REPUBLISH DONE"}
			if got := outcomes(run); err != nil || !slices.Equal(got, want) || run.Actions != 1 ||
				!slices.Equal(svc.taken(), []string{fmt.Sprintf("republish %s [E-pending]", service)}) {
				t.Fatalf("run past the deadline: %v, %d actions, compensations %v, %v; want %v and one republish", got, run.Actions, svc.taken(), err, want)
			}
		})
	}
}

// TestAnActionIsEscalatedOnlyPastTheDeadline: an action taken and finished
// is given the convergence deadline to work; a run at exactly that moment
// still reports it as taken (for the action it took), a run a microsecond
// later hands the finding to a person. The action records who asked for
// it: the run, by id and starter.
func TestAnActionIsEscalatedOnlyPastTheDeadline(t *testing.T) {
	const deadline = time.Minute
	svc := newServices(paidButLost("O-1"))
	clock := &fixedClock{now: time.Now()}
	r, store, _ := newReconcilerAt(t, svc, deadline, clock.Now)
	ctx := context.Background()
	first, err := r.Run(ctx, "nightly", rec.Scope{OrderIDs: []string{"O-1"}})
	if got, want := outcomes(first), []string{"O-1 MISSING_EFFECT REPUBLISH DONE"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("first run: %v, %v; want %v", got, err, want)
	}
	// A claim of a finished action does not take it again: it returns the
	// action as recorded.
	claimed, taken, err := store.Claim(ctx, rec.Taken{Key: first.Findings[0].ActionKey}, time.Minute, 3)
	if err != nil || claimed || taken.FinishedAt == nil {
		t.Fatalf("the first run's action: %+v, claimed %v, %v", taken, claimed, err)
	}
	if want := fmt.Sprintf("reconciliation run %d (nightly)", first.ID); taken.RequestedBy != want || taken.RunID != first.ID {
		t.Fatalf("action requested by %q in run %d, want %q in run %d", taken.RequestedBy, taken.RunID, want, first.ID)
	}

	clock.Set(taken.FinishedAt.Add(deadline))
	at, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if got, want := outcomes(at), []string{"O-1 MISSING_EFFECT REPUBLISH ALREADY_TAKEN"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("run at the action's deadline: %v, %v; want %v", got, err, want)
	}
	clock.Set(taken.FinishedAt.Add(deadline + time.Microsecond))
	past, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if got, want := outcomes(past), []string{"O-1 MISSING_EFFECT MANUAL_REVIEW ESCALATED"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("run past the action's deadline: %v, %v; want %v", got, err, want)
	}
	if n := len(svc.taken()); n != 1 {
		t.Fatalf("compensations %v, want the first run's only", svc.taken())
	}
}

// TestRequestedByOf: calls made outside a run are reconciliation's own.
func TestRequestedByOf(t *testing.T) {
	if got := app.RequestedByOf(context.Background()); got != "reconciliation" {
		t.Fatalf("RequestedByOf(no caller) = %q", got)
	}
	if got := app.RequestedByOf(app.WithRequestedBy(context.Background(), "ops")); got != "ops" {
		t.Fatalf("RequestedByOf(ops) = %q", got)
	}
}

// TestARunReadsEachPageOnce: a run over orders named by id reads the order
// service a page at a time and every service's facts of each page once;
// converged orders are not read again, and a page count that divides the
// ids asks for no empty page. So does a check of a converged order.
func TestARunReadsEachPageOnce(t *testing.T) {
	svc := newServices(converged("O-1"), converged("O-2"), converged("O-3"), converged("O-4"))
	r, _, _ := newReconciler(t, svc, time.Minute)
	run, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1", "O-2", "O-3", "O-4"}})
	if err != nil || run.Checked != 4 || len(run.Findings) != 0 {
		t.Fatalf("run: checked %d, %v, %v", run.Checked, outcomes(run), err)
	}
	if o, f := svc.readsOf("orders"), svc.readsOf("facts"); o != 2 || f != 2 {
		t.Fatalf("%d reads of the orders and %d of their facts, want 2 and 2 (pages of 2)", o, f)
	}
	check, err := r.Check(context.Background(), "O-1")
	if err != nil || !check.Converged {
		t.Fatalf("check: %+v, %v", check, err)
	}
	if o := svc.readsOf("orders"); o != 3 {
		t.Fatalf("a check of a converged order read the order %d times, want once", o-2)
	}
}

// TestOrderIDsUpToTheLimit: a run may name MaxOrderIDs orders, not one
// more.
func TestOrderIDsUpToTheLimit(t *testing.T) {
	cfg := app.DefaultConfig()
	cfg.PageSize = 1000
	svc := newServices()
	r, _, _ := newReconcilerWith(t, svc, cfg)
	ids := make([]string, app.MaxOrderIDs+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("O-%05d", i)
	}
	run, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: ids[:app.MaxOrderIDs]})
	if err != nil || run.Status != rec.RunSucceeded || run.Checked != 0 {
		t.Fatalf("run over %d unknown orders: %s checked %d, %v", app.MaxOrderIDs, run.Status, run.Checked, err)
	}
	if n := svc.readsOf("orders"); n != app.MaxOrderIDs/cfg.PageSize {
		t.Fatalf("%d reads of the orders, want %d", n, app.MaxOrderIDs/cfg.PageSize)
	}
	_, err = r.Run(context.Background(), "test", rec.Scope{OrderIDs: ids})
	var invalid *rules.RuleError
	if !errors.As(err, &invalid) || invalid.Field != "orderIds" {
		t.Fatalf("run over %d orders: %v, want orderIds refused", len(ids), err)
	}
}

// TestARunThatCannotReadFails: a service down fails the run, which is
// recorded and counted as failed.
func TestARunThatCannotReadFails(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"))
	svc.down = true
	r, store, reg := newReconciler(t, svc, time.Minute)
	run, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if err != nil || run.Status != rec.RunFailed || !strings.Contains(run.Error, "facts") || len(svc.taken()) != 0 {
		t.Fatalf("run with a service down: %s %q, compensations %v, %v", run.Status, run.Error, svc.taken(), err)
	}
	stored, err := store.Run(context.Background(), run.ID)
	if err != nil || stored.Status != rec.RunFailed {
		t.Fatalf("audited run %+v, %v", stored, err)
	}
	for outcome, want := range map[string]float64{"succeeded": 0, "failed": 1} {
		if v := sample(t, reg, "reconciliation_runs_total", map[string]string{"outcome": outcome}); v != want {
			t.Fatalf("reconciliation_runs_total{%s} = %v, want %v", outcome, v, want)
		}
	}
}

// TestACheckOfAnOrderThatMovedOnIsNotConverged: the check reads the order
// as PENDING_PAYMENT, its inventory already deducted for OrderPaid v3, and
// the order read again is paid at v3: not a regression, and not converged
// either, since the comparison paired the order as it was with a later
// effect. Nothing is recorded or taken.
func TestACheckOfAnOrderThatMovedOnIsNotConverged(t *testing.T) {
	moving := converged("O-1")
	moving.Inventory.Consumer = rec.ConsumerState{Version: 3, State: "DEDUCTED"}
	before := moving
	before.Order.Status, before.Order.Version, before.Order.PaymentID = rec.StatusPendingPayment, 2, ""
	svc := newServices(before)
	svc.moves = map[string]rec.Facts{"O-1": moving}
	r, _, _ := newReconciler(t, svc, time.Minute)
	check, err := r.Check(context.Background(), "O-1")
	if err != nil || check.Converged || len(check.Mismatches) == 0 {
		t.Fatalf("check: %+v, %v; want not converged", check, err)
	}
	for _, m := range check.Mismatches {
		if m.Kind == rec.OrderVersionRegressed {
			t.Fatalf("check: %+v; an order that moved on is no regression", check)
		}
	}
	if n := svc.readsOf("orders"); n != 2 || len(svc.taken()) != 0 {
		t.Fatalf("%d reads of the order, compensations %v; want 2 reads, none", n, svc.taken())
	}
}
