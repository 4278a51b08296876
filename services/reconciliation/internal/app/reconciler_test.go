package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// services stands for the five services' APIs: it holds each order's facts
// and records every compensation asked of it, so a test can count them.
type services struct {
	mu      sync.Mutex
	facts   map[string]rec.Facts
	order   []string
	calls   []string
	failing bool // compensations fail, as a service that is down does
	// moves are what each order becomes right after its next read by
	// Orders: the order moved on between a run's read of it and its read
	// of the other services.
	moves map[string]rec.Facts
	// effects are the order ids each consumer holds effects for, and
	// effectsBefore the last time asked for.
	effects       map[string][]string
	effectsBefore time.Time
	// reads counts the reads of each kind ("changed", "orders", "unknown",
	// "facts", "effects <service>"): what a run or a look costs the
	// services.
	reads map[string]int
	// down: reading the services' facts fails, as when one is down.
	down bool
}

func newServices(facts ...rec.Facts) *services {
	s := &services{facts: map[string]rec.Facts{}, reads: map[string]int{}}
	for _, f := range facts {
		s.facts[f.Order.ID] = f
		s.order = append(s.order, f.Order.ID)
	}
	return s
}

func (s *services) ChangedOrders(_ context.Context, after app.Cursor, before time.Time, limit int) ([]rec.Order, *app.Cursor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads["changed"]++
	var out []rec.Order
	for _, id := range s.order {
		o := s.facts[id].Order
		if !before.IsZero() && !o.UpdatedAt.Before(before) {
			continue
		}
		if o.UpdatedAt.Before(after.ChangedAfter) || o.UpdatedAt.Equal(after.ChangedAfter) && o.ID <= after.AfterID {
			continue
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b rec.Order) int {
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(out) > limit {
		last := out[limit-1]
		return out[:limit], &app.Cursor{ChangedAfter: last.UpdatedAt, AfterID: last.ID}, nil
	}
	return out, nil, nil
}

func (s *services) Orders(_ context.Context, ids []string) ([]rec.Order, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads["orders"]++
	out := make([]rec.Order, len(ids))
	for i, id := range ids {
		f, ok := s.facts[id]
		out[i] = f.Order
		if !ok {
			out[i] = rec.Order{ID: id}
		}
		if next, ok := s.moves[id]; ok {
			s.facts[id] = next
			delete(s.moves, id)
		}
	}
	return out, nil
}

func (s *services) UnknownOrders(_ context.Context, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads["unknown"]++
	var out []string
	for _, id := range ids {
		if _, ok := s.facts[id]; !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

func (s *services) Facts(_ context.Context, orders []rec.Order) ([]rec.Facts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads["facts"]++
	if s.down {
		return nil, fmt.Errorf("%w: facts", app.ErrUnavailable)
	}
	out := make([]rec.Facts, len(orders))
	for i, o := range orders {
		out[i] = s.facts[o.ID]
		out[i].Order = o // the order as the caller read it
	}
	return out, nil
}

func (s *services) EffectOrders(_ context.Context, service, after string, before time.Time, limit int) ([]string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.effectsBefore = before
	s.reads["effects "+service]++
	ids := slices.Sorted(slices.Values(s.effects[service]))
	var out []string
	for _, id := range ids {
		if id > after && len(out) < limit {
			out = append(out, id)
		}
	}
	if len(out) == limit {
		return out, out[len(out)-1], nil
	}
	return out, "", nil
}

func (s *services) call(what string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failing {
		return "", fmt.Errorf("%w: %s", app.ErrUnavailable, what)
	}
	s.calls = append(s.calls, what)
	return what + " done", nil
}

func (s *services) Refund(_ context.Context, orderID, refundID string, amount decimal.Decimal, _ string) (string, error) {
	return s.call(fmt.Sprintf("refund %s %s %s", orderID, refundID, amount))
}

func (s *services) Republish(_ context.Context, service string, ids []string) (string, error) {
	return s.call(fmt.Sprintf("republish %s %v", service, ids))
}

func (s *services) Replay(_ context.Context, service string, id int64) (string, error) {
	return s.call(fmt.Sprintf("replay %s %d", service, id))
}

// Fence raises the order's version as the order service does.
func (s *services) Fence(_ context.Context, orderID string, atLeast int64) (string, error) {
	out, err := s.call(fmt.Sprintf("fence %s %d", orderID, atLeast))
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.facts[orderID]
	f.Order.Version = max(f.Order.Version, atLeast)
	s.facts[orderID] = f
	return out, nil
}

// readsOf returns how many reads of kind the services have answered.
func (s *services) readsOf(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[kind]
}

func (s *services) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func dec(v string) decimal.Decimal { return decimal.RequireFromString(v) }

var long = time.Now().Add(-time.Hour)

func sent(id, typ string, v int64) rec.OutboxRow {
	return rec.OutboxRow{EventID: id, EventType: typ, AggregateVersion: v, Status: "SENT", CreatedAt: long}
}

// cancelledAndCharged is the first case: cancelled, but the payment
// service took 10.00 and nothing went back.
func cancelledAndCharged(id string) rec.Facts {
	return rec.Facts{
		Order: rec.Order{ID: id, Found: true, Status: rec.StatusCancelled, Version: 3, Amount: dec("10"), Currency: "CNY",
			UpdatedAt: long, Events: []rec.OutboxRow{sent("E-"+id+"-1", "OrderCreated", 1), sent("E-"+id+"-3", "OrderCancelled", 3)}},
		Payment:   rec.Payment{Found: true, PaymentID: "P-" + id, Amount: dec("10"), Currency: "CNY", Status: rec.PaymentSucceeded, Refunded: decimal.Zero},
		Inventory: rec.Inventory{Status: rec.InventoryNone},
	}
}

// paidButLost is a paid order whose inventory effect was lost.
func paidButLost(id string) rec.Facts {
	return rec.Facts{
		Order: rec.Order{ID: id, Found: true, Status: rec.StatusPaid, Version: 3, Amount: dec("10"), Currency: "CNY", PaymentID: "P-" + id,
			Items: []rec.OrderLine{{Line: rec.Line{SKU: "S", Quantity: 1}, UnitPrice: dec("10")}}, UpdatedAt: long,
			Events: []rec.OutboxRow{sent("E-"+id+"-1", "OrderCreated", 1), sent("E-"+id+"-3", "OrderPaid", 3)}},
		Payment:       rec.Payment{Found: true, PaymentID: "P-" + id, Amount: dec("10"), Currency: "CNY", Status: rec.PaymentSucceeded},
		Inventory:     rec.Inventory{Status: rec.InventoryNone},
		Points:        rec.Points{Entries: []rec.PointsEntry{{Type: "EARN", Points: 10, Amount: dec("10")}}},
		Notifications: rec.Notifications{Sent: []rec.Notice{{Kind: "ORDER_PAID"}}},
	}
}

func newReconciler(t *testing.T, peers app.Peers, deadline time.Duration) (*app.Reconciler, *adapters.Store, *prometheus.Registry) {
	t.Helper()
	return newReconcilerAt(t, peers, deadline, nil)
}

// newReconcilerAt is newReconciler with a clock.
func newReconcilerAt(t *testing.T, peers app.Peers, deadline time.Duration, clock func() time.Time) (*app.Reconciler, *adapters.Store, *prometheus.Registry) {
	t.Helper()
	cfg := app.DefaultConfig()
	cfg.Deadline, cfg.PageSize, cfg.OrphanPageSize, cfg.Clock = deadline, 2, 2, clock
	return newReconcilerWith(t, peers, cfg)
}

// newReconcilerWith is newReconciler with a whole configuration.
func newReconcilerWith(t *testing.T, peers app.Peers, cfg app.Config) (*app.Reconciler, *adapters.Store, *prometheus.Registry) {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, postgres.MigrationSet{Name: "reconciliation", FS: os.DirFS("../../migrations")})
	store := adapters.NewStore(db)
	reg := prometheus.NewRegistry()
	r, err := app.NewReconciler(cfg, peers, store, app.NewMetrics(reg), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return r, store, reg
}

func outcomes(run rec.Run) []string {
	var out []string
	for _, f := range run.Findings {
		out = append(out, fmt.Sprintf("%s %s %s %s", f.OrderID, f.Kind, f.Action, strings.SplitN(f.Outcome, ":", 2)[0]))
	}
	return out
}

// TestRunsActOnceAndAudit: the first run finds each fact and takes its
// compensation; a second run over the same facts finds them again and takes
// no second action; every run, finding and action is in the audit.
func TestRunsActOnceAndAudit(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"), paidButLost("O-2"), paidButLost("O-3"))
	r, store, reg := newReconciler(t, svc, time.Minute)
	ctx := context.Background()

	first, err := r.Run(ctx, "test", rec.Scope{MinAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"O-1 PAYMENT_FOR_UNPAYABLE_ORDER REFUND DONE",
		"O-2 MISSING_EFFECT REPUBLISH DONE",
		"O-3 MISSING_EFFECT REPUBLISH DONE",
	}
	if got := outcomes(first); !slices.Equal(got, want) || first.Status != rec.RunSucceeded || first.Checked != 3 || first.Actions != 3 {
		t.Fatalf("first run %s checked %d actions %d:\n%v\nwant %v", first.Status, first.Checked, first.Actions, got, want)
	}
	if n := len(svc.taken()); n != 3 {
		t.Fatalf("%d compensations, want 3: %v", n, svc.taken())
	}

	second, err := r.Run(ctx, "test", rec.Scope{MinAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range second.Findings {
		if !strings.HasPrefix(f.Outcome, "ALREADY_TAKEN") {
			t.Errorf("second run: %s %s: %s, want ALREADY_TAKEN", f.OrderID, f.Kind, f.Outcome)
		}
	}
	if n := len(svc.taken()); len(second.Findings) != 3 || second.Actions != 0 || n != 3 {
		t.Fatalf("second run: %d findings, %d actions, %d compensations in all; want 3, 0, 3", len(second.Findings), second.Actions, n)
	}

	stored, err := store.Run(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.StartedBy != "test" || stored.Status != rec.RunSucceeded || stored.FinishedAt == nil || !slices.Equal(outcomes(stored), want) {
		t.Fatalf("audited run %+v", stored)
	}
	if v := sample(t, reg, "reconciliation_actions_total", map[string]string{"action": "REFUND", "outcome": "done"}); v != 1 {
		t.Fatalf("reconciliation_actions_total{REFUND,done} = %v, want 1", v)
	}
	for outcome, want := range map[string]float64{"succeeded": 2, "failed": 0} {
		if v := sample(t, reg, "reconciliation_runs_total", map[string]string{"outcome": outcome}); v != want {
			t.Fatalf("reconciliation_runs_total{%s} = %v, want %v", outcome, v, want)
		}
	}
}

// TestTwoRunsAtOnceTakeOneAction starts runs over the same facts at once:
// one runs at a time, the others are refused while it does, and each
// compensation is taken once however the runs fall.
func TestTwoRunsAtOnceTakeOneAction(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"), paidButLost("O-2"))
	r, _, _ := newReconciler(t, svc, time.Minute)
	var wg sync.WaitGroup
	runs := make([]rec.Run, 4)
	errs := make([]error, len(runs))
	for i := range runs {
		wg.Go(func() { runs[i], errs[i] = r.Run(context.Background(), fmt.Sprintf("runner %d", i), rec.Scope{}) })
	}
	wg.Wait()
	actions, ran := 0, 0
	for i, run := range runs {
		switch {
		case errors.Is(errs[i], app.ErrRunInProgress):
			continue
		case errs[i] != nil || len(run.Findings) != 2:
			t.Fatalf("run %d: %v, %d findings", i, errs[i], len(run.Findings))
		}
		ran++
		actions += run.Actions
	}
	if n := len(svc.taken()); ran == 0 || actions != 2 || n != 2 {
		t.Fatalf("%d actions over %d runs, %d compensations; want 2 and 2", actions, ran, n)
	}
}

// TestFailedCompensationIsRetriedThenGivenUp: the payment service is down;
// each run tries again, up to the attempts allowed, then says so.
func TestFailedCompensationIsRetriedThenGivenUp(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"))
	svc.failing = true
	r, _, _ := newReconciler(t, svc, time.Minute)
	var got []string
	for range 4 {
		run, err := r.Run(context.Background(), "test", rec.Scope{})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.SplitN(run.Findings[0].Outcome, ":", 2)[0])
	}
	if want := []string{"FAILED", "FAILED", "FAILED", "GIVEN_UP"}; !slices.Equal(got, want) {
		t.Fatalf("outcomes %v, want %v", got, want)
	}
}

// TestAnActionThatDidNotHelpIsEscalated: the republish was taken, the
// deadline passed, and the effect is still missing: a person must look.
func TestAnActionThatDidNotHelpIsEscalated(t *testing.T) {
	svc := newServices(paidButLost("O-1"))
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r, _, _ := newReconcilerAt(t, svc, time.Minute, clock)
	if _, err := r.Run(context.Background(), "test", rec.Scope{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Hour) // past the deadline of the action taken
	mu.Unlock()
	run, err := r.Run(context.Background(), "test", rec.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	f := run.Findings[0]
	if f.Action != rec.ActionManualReview || !strings.HasPrefix(f.Outcome, "ESCALATED") || len(svc.taken()) != 1 {
		t.Fatalf("finding %+v after %v, want MANUAL_REVIEW ESCALATED and one compensation", f, svc.taken())
	}
}

// TestAnOrderCheckedOutBetweenTheReadsIsNotRefunded: the run reads the
// order as CREATED; before it reads the payment, the order is checked out
// and paid. The payment looks like one for an unpayable order (and the
// other services' effects like extra ones), but the order is read again
// before anything is recorded or any money goes back: nothing is found and
// nothing refunded. A payment for an order that really was cancelled is
// refunded.
func TestAnOrderCheckedOutBetweenTheReadsIsNotRefunded(t *testing.T) {
	created := rec.Facts{Order: rec.Order{ID: "O-1", Found: true, Status: rec.StatusCreated, Version: 1, Amount: dec("10"), Currency: "CNY",
		Items: []rec.OrderLine{{Line: rec.Line{SKU: "S", Quantity: 1}, UnitPrice: dec("10")}}, UpdatedAt: long,
		Events: []rec.OutboxRow{sent("E-O-1-1", "OrderCreated", 1)}}, Inventory: rec.Inventory{Status: rec.InventoryNone}}
	paid := paidButLost("O-1")
	paid.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}}
	// O-3 is read as paid and then found cancelled with its payment: only
	// the second read calls for a refund, which waits for the next run.
	svc := newServices(created, cancelledAndCharged("O-2"), paidButLost("O-3"))
	svc.moves = map[string]rec.Facts{"O-1": paid, "O-3": cancelledAndCharged("O-3")}
	r, _, _ := newReconciler(t, svc, time.Minute)

	run, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1", "O-2", "O-3"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"O-2 PAYMENT_FOR_UNPAYABLE_ORDER REFUND DONE", "O-3 PAYMENT_FOR_UNPAYABLE_ORDER REFUND DEFERRED"}
	if got := outcomes(run); !slices.Equal(got, want) || run.Actions != 1 {
		t.Fatalf("run: %v, %d actions; want %v, 1", got, run.Actions, want)
	}
	if got := svc.taken(); !slices.Equal(got, []string{"refund O-2 " + rules.ReturnRefundID("P-O-2") + " 10"}) {
		t.Fatalf("compensations %v, want only O-2's refund", got)
	}
	again, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1", "O-3"}})
	if got, want := outcomes(again), []string{"O-3 PAYMENT_FOR_UNPAYABLE_ORDER REFUND DONE"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("the next run: %v, %v; want %v", got, err, want)
	}
}

// TestARestoredOrderIsFenced: the order service went back to version 2
// (PENDING_PAYMENT) while its consumers applied version 3 (OrderPaid). The
// run fences the order at version 3, once for both regressed consumers,
// and takes none of the actions the order's stale state calls for
// (republishing the payment's callback before the fence would make the
// order emit OrderPaid as version 3, which every consumer ignores as
// stale). The next run compares the fenced order anew and fences nothing.
// An order that merely moved on between the run's reads is no regression.
func TestARestoredOrderIsFenced(t *testing.T) {
	restored := paidButLost("O-1")
	restored.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}, Consumer: rec.ConsumerState{Version: 3, State: "DEDUCTED"}}
	restored.Points.Consumer = rec.ConsumerState{Version: 3, State: "EARNED"}
	restored.Order.Status, restored.Order.Version, restored.Order.PaymentID = rec.StatusPendingPayment, 2, ""
	restored.Order.Events = restored.Order.Events[:1]

	moving := paidButLost("O-2")
	moving.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}, Consumer: rec.ConsumerState{Version: 3, State: "DEDUCTED"}}
	before := moving
	before.Order.Status, before.Order.Version, before.Order.PaymentID = rec.StatusPendingPayment, 2, ""
	svc := newServices(restored, before)
	svc.moves = map[string]rec.Facts{"O-2": moving}
	r, store, reg := newReconciler(t, svc, time.Minute)
	ctx := context.Background()

	check, err := r.Check(ctx, "O-1")
	if err != nil || check.Converged || len(check.Mismatches) != 2 || check.Mismatches[0].Kind != rec.OrderVersionRegressed {
		t.Fatalf("check of O-1 before the run: %+v, %v", check, err)
	}
	run, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1", "O-2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"O-1 ORDER_VERSION_REGRESSED FENCE DONE", "O-1 ORDER_VERSION_REGRESSED FENCE ALREADY_TAKEN"}
	if got := outcomes(run); !slices.Equal(got, want) || run.Actions != 1 || !slices.Equal(svc.taken(), []string{"fence O-1 3"}) {
		t.Fatalf("run: %v, %d actions, compensations %v; want %v and one fence at 3", got, run.Actions, svc.taken(), want)
	}
	f := run.Findings[0]
	if f.Service != rec.ServiceInventory || f.ActionKey != "FENCE:order:O-1:v2:v3" || !strings.Contains(f.Outcome, "fence O-1 3 done") {
		t.Fatalf("finding %+v, want inventory's, fenced under FENCE:order:O-1:v2:v3", f)
	}
	stored, err := store.Run(ctx, run.ID)
	if err != nil || !slices.Equal(outcomes(stored), want) {
		t.Fatalf("audited run %v, %v; want %v", outcomes(stored), err, want)
	}
	if v := sample(t, reg, "reconciliation_actions_total", map[string]string{"action": "FENCE", "outcome": "done"}); v != 1 {
		t.Fatalf("reconciliation_actions_total{FENCE,done} = %v, want 1", v)
	}

	// Fenced at 3, the order is no longer behind its consumers: the next
	// run judges its state, and fences nothing again.
	next, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range next.Findings {
		if f.Kind == rec.OrderVersionRegressed || f.Action == rec.ActionFence {
			t.Fatalf("the next run: %v; want no regression once fenced", outcomes(next))
		}
	}
	if n := len(svc.taken()); n != 1+next.Actions {
		t.Fatalf("compensations %v after the next run's %d actions", svc.taken(), next.Actions)
	}
}

// TestAFenceThatFailsIsRetried: a fence the order service does not answer
// is FAILED, and the next run takes it again.
func TestAFenceThatFailsIsRetried(t *testing.T) {
	restored := paidButLost("O-1")
	restored.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}, Consumer: rec.ConsumerState{Version: 5, State: "DEDUCTED"}}
	svc := newServices(restored)
	svc.failing = true
	r, _, _ := newReconciler(t, svc, time.Minute)
	ctx := context.Background()
	first, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if got, want := outcomes(first), []string{"O-1 ORDER_VERSION_REGRESSED FENCE FAILED"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("run with the order service down: %v, %v; want %v", got, err, want)
	}
	svc.mu.Lock()
	svc.failing = false
	svc.mu.Unlock()
	second, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if got, want := outcomes(second), []string{"O-1 ORDER_VERSION_REGRESSED FENCE DONE"}; err != nil || !slices.Equal(got, want) ||
		!slices.Equal(svc.taken(), []string{"fence O-1 5"}) {
		t.Fatalf("the next run: %v, %v, compensations %v; want %v and one fence at 5", got, err, svc.taken(), want)
	}
}

// TestOrphanEffects: a run over every order lists, a page at a time, the
// orders each consumer holds effects for and names those the order
// service does not know, for a person, up to MaxOrphans a service; a run
// over orders named by id does not look.
func TestOrphanEffects(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"))
	many := make([]string, app.MaxOrphans+5)
	for i := range many {
		many[i] = fmt.Sprintf("O-bench-%03d", i)
	}
	svc.effects = map[string][]string{
		rec.ServicePayment:   {"O-1", "O-lost"},
		rec.ServiceInventory: {"O-gone", "O-1"},
		rec.ServicePoints:    many,
	}
	r, _, _ := newReconciler(t, svc, time.Minute)
	named, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if err != nil || len(named.Findings) != 1 {
		t.Fatalf("run over O-1: %v, %v", outcomes(named), err)
	}

	run, err := r.Run(context.Background(), "test", rec.Scope{MinAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.effectsBefore.Equal(run.StartedAt.Add(-time.Minute)) {
		t.Fatalf("effects asked for before %v, want the run's start less minAge", svc.effectsBefore)
	}
	orphans := map[string][]string{}
	for _, f := range run.Findings {
		if f.Kind == rec.OrphanEffect {
			if f.Action != rec.ActionManualReview || !strings.HasPrefix(f.Outcome, "OPEN") {
				t.Fatalf("orphan finding %+v, want an open MANUAL_REVIEW", f)
			}
			orphans[f.Service] = append(orphans[f.Service], f.OrderID)
		}
	}
	if got := orphans[rec.ServicePayment]; !slices.Equal(got, []string{"O-lost"}) {
		t.Fatalf("payment orphans %v", got)
	}
	if got := orphans[rec.ServiceInventory]; !slices.Equal(got, []string{"O-gone"}) {
		t.Fatalf("inventory orphans %v", got)
	}
	if got := orphans[rec.ServicePoints]; !slices.Equal(got, many[:app.MaxOrphans]) {
		t.Fatalf("%d points orphans, want the first %d", len(got), app.MaxOrphans)
	}
	// Once MaxOrphans are named, no further page of the points service's
	// orders is read: the bound is on the run's work, not only its output.
	if n := svc.readsOf("effects " + rec.ServicePoints); n != app.MaxOrphans/2 {
		t.Fatalf("%d pages of the points service's orders read, want %d (%d orphans in pages of 2)", n, app.MaxOrphans/2, app.MaxOrphans)
	}
	if len(svc.taken()) != 1 {
		t.Fatalf("compensations %v, want only O-1's refund", svc.taken())
	}
}

// TestNamedOrphans: a run over orders named by id names, for a person,
// each service holding effects of a named order the order service does
// not know (one created after the backup its database was restored from),
// and takes no action; an id nobody knows is no finding.
func TestNamedOrphans(t *testing.T) {
	lost := paidButLost("O-lost")
	lost.Order = rec.Order{ID: "O-lost"}
	lost.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}}
	svc := newServices(cancelledAndCharged("O-1"), lost)
	r, _, reg := newReconciler(t, svc, time.Minute)
	run, err := r.Run(context.Background(), "test", rec.Scope{OrderIDs: []string{"O-1", "O-lost", "O-nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"O-1 PAYMENT_FOR_UNPAYABLE_ORDER REFUND DONE",
		"O-lost ORPHAN_EFFECT MANUAL_REVIEW OPEN",
		"O-lost ORPHAN_EFFECT MANUAL_REVIEW OPEN",
		"O-lost ORPHAN_EFFECT MANUAL_REVIEW OPEN",
		"O-lost ORPHAN_EFFECT MANUAL_REVIEW OPEN",
	}
	if got := outcomes(run); !slices.Equal(got, want) || run.Actions != 1 {
		t.Fatalf("run: %v, %d actions; want %v, 1", got, run.Actions, want)
	}
	var services []string
	for _, f := range run.Findings[1:] {
		services = append(services, f.Service)
	}
	if !slices.Equal(services, rec.Consumers()) {
		t.Fatalf("orphan effects named at %v, want %v", services, rec.Consumers())
	}
	if v := sample(t, reg, "reconciliation_findings_total", map[string]string{"kind": "ORPHAN_EFFECT", "service": "inventory"}); v != 1 {
		t.Fatalf("reconciliation_findings_total{ORPHAN_EFFECT,inventory} = %v, want 1", v)
	}
}

func TestRunScope(t *testing.T) {
	recent := paidButLost("O-new")
	recent.Order.UpdatedAt = time.Now()
	// The order service's clock runs ahead of the reconciliation
	// database's: the order changed "after" the run started.
	ahead := paidButLost("O-ahead")
	ahead.Order.UpdatedAt = time.Now().Add(time.Hour)
	svc := newServices(paidButLost("O-1"), paidButLost("O-2"), paidButLost("O-3"), recent, ahead)
	r, _, _ := newReconciler(t, svc, time.Minute)
	tests := []struct {
		name     string
		scope    rec.Scope
		want     int
		inFlight []string
		err      bool
	}{
		{"every order older than the deadline, over pages of 2", rec.Scope{MinAge: time.Minute}, 3, nil, false},
		{"every order", rec.Scope{}, 4, nil, false},
		{"orders named, a recent one in flight", rec.Scope{OrderIDs: []string{"O-new", "O-2", "O-unknown"}, MinAge: time.Minute}, 1, []string{"O-new"}, false},
		{"orders named, minAge 0s: every one now", rec.Scope{OrderIDs: []string{"O-new", "O-2", "O-unknown"}}, 2, nil, false},
		{"orders named, minAge 0s: even one changed after the run started", rec.Scope{OrderIDs: []string{"O-ahead"}}, 1, nil, false},
		{"orders named, minAge 1m: one changed after the run started is in flight", rec.Scope{OrderIDs: []string{"O-ahead"}, MinAge: time.Minute}, 0, []string{"O-ahead"}, false},
		{"a bad id", rec.Scope{OrderIDs: []string{"O 1"}}, 0, nil, true},
		{"a negative age", rec.Scope{MinAge: -time.Second}, 0, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run, err := r.Run(context.Background(), "test", tt.scope)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if err == nil && (run.Checked != tt.want || !slices.Equal(run.InFlight, tt.inFlight)) {
				t.Fatalf("checked %d, in flight %v; want %d, %v", run.Checked, run.InFlight, tt.want, tt.inFlight)
			}
		})
	}
}

// TestAnOrderInFlightSpendsNoAction: an order named by id whose last change
// is younger than minAge is not compared, so no finding is recorded and
// the action key is not spent; once it is old enough (or minAge is 0s) the
// finding is made and its action taken.
func TestAnOrderInFlightSpendsNoAction(t *testing.T) {
	recent := paidButLost("O-1")
	recent.Order.UpdatedAt = time.Now()
	svc := newServices(recent)
	r, store, _ := newReconciler(t, svc, time.Minute)
	ctx := context.Background()
	early, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}, MinAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(early.Findings) != 0 || early.Actions != 0 || len(svc.taken()) != 0 || !slices.Equal(early.InFlight, []string{"O-1"}) {
		t.Fatalf("in-flight run: findings %v, actions %d, compensations %v, in flight %v", outcomes(early), early.Actions, svc.taken(), early.InFlight)
	}
	stored, err := store.Run(ctx, early.ID)
	if err != nil || !slices.Equal(stored.InFlight, []string{"O-1"}) {
		t.Fatalf("audited run in flight %v, %v", stored.InFlight, err)
	}
	now, err := r.Run(ctx, "test", rec.Scope{OrderIDs: []string{"O-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(now), []string{"O-1 MISSING_EFFECT REPUBLISH DONE"}; !slices.Equal(got, want) || len(now.InFlight) != 0 {
		t.Fatalf("run with minAge 0s: %v, in flight %v; want %v", got, now.InFlight, want)
	}
}

func TestCheck(t *testing.T) {
	converged := paidButLost("O-ok")
	converged.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}}
	svc := newServices(converged, paidButLost("O-lost"))
	r, _, _ := newReconciler(t, svc, time.Minute)
	ok, err := r.Check(context.Background(), "O-ok")
	if err != nil || !ok.Converged || len(ok.Mismatches) != 0 {
		t.Fatalf("O-ok: %+v %v", ok, err)
	}
	lost, err := r.Check(context.Background(), "O-lost")
	if err != nil || lost.Converged || len(lost.Mismatches) != 1 || lost.Mismatches[0].Service != rec.ServiceInventory {
		t.Fatalf("O-lost: %+v %v", lost, err)
	}
	// Paid at the payment service a moment ago, its callback still in the
	// outbox: nothing to compensate, but not converged either.
	paying := rec.Facts{
		Order: rec.Order{ID: "O-paying", Found: true, Status: rec.StatusPendingPayment, Version: 1, Amount: dec("10"), Currency: "CNY",
			UpdatedAt: time.Now(), Events: []rec.OutboxRow{sent("E-paying-1", "OrderCreated", 1)}},
		Payment: rec.Payment{Found: true, PaymentID: "P-paying", Amount: dec("10"), Currency: "CNY", Status: rec.PaymentSucceeded,
			Outbox: []rec.OutboxRow{{EventID: "C-paying", EventType: "PAYMENT_SUCCEEDED", AggregateVersion: 1, Status: "PENDING", CreatedAt: time.Now()}}},
		Inventory: rec.Inventory{Status: rec.InventoryNone},
	}
	svc = newServices(converged, paidButLost("O-lost"), paying)
	r, _, _ = newReconciler(t, svc, time.Minute)
	inFlight, err := r.Check(context.Background(), "O-paying")
	if err != nil || inFlight.Converged || len(inFlight.Mismatches) != 1 ||
		inFlight.Mismatches[0].Kind != rec.InFlight || inFlight.Mismatches[0].Service != rec.ServicePayment {
		t.Fatalf("O-paying (callback in the outbox): %+v %v; want not converged, one IN_FLIGHT at payment", inFlight, err)
	}
	if len(svc.taken()) != 0 {
		t.Fatalf("a check took compensations: %v", svc.taken())
	}
	if _, err := r.Check(context.Background(), "O-none"); !errors.Is(err, app.ErrOrderNotFound) {
		t.Fatalf("unknown order: %v", err)
	}
}

// sample reads the value of the series of name with labels from reg.
func sample(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s %v", name, labels)
	return 0
}
