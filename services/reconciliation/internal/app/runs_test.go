package app_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// held is the services with a gate: a run's read of the second page of
// changed orders waits at it until the test opens it, so the run is
// known to be still working.
type held struct {
	*services
	once    sync.Once
	reached chan struct{} // closed when a read waits at the gate
	gate    chan struct{} // closed by the test
}

func hold(s *services) *held {
	return &held{services: s, reached: make(chan struct{}), gate: make(chan struct{})}
}

func (h *held) ChangedOrders(ctx context.Context, after app.Cursor, before time.Time, limit int) ([]rec.Order, *app.Cursor, error) {
	if after != (app.Cursor{}) {
		h.once.Do(func() { close(h.reached) })
		select {
		case <-h.gate:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
	return h.services.ChangedOrders(ctx, after, before, limit)
}

// serve runs the reconciler's Serve until the test ends.
func serve(t *testing.T, r *app.Reconciler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// stored reads run id from the audit.
func stored(t *testing.T, store *adapters.Store, id int64) rec.Run {
	t.Helper()
	run, err := store.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// TestAStartedRunOutlivesItsStart: Start answers with the RUNNING run while
// the run is held at its second page; the audit shows it RUNNING with the
// first page's progress and findings, a second start is refused naming
// it, and once let go the run finishes SUCCEEDED with every finding.
func TestAStartedRunOutlivesItsStart(t *testing.T) {
	svc := hold(newServices(cancelledAndCharged("O-1"), paidButLost("O-2"), paidButLost("O-3")))
	r, store, _ := newReconciler(t, svc, time.Minute) // two orders a page
	serve(t, r)
	reqCtx, answered := context.WithCancel(context.Background())
	started, err := r.Start(reqCtx, "alice", rec.Scope{MinAge: time.Minute})
	answered() // the request is over: the run must not depend on it
	if err != nil {
		t.Fatal(err)
	}
	if started.ID == 0 || started.Status != rec.RunRunning || started.StartedBy != "alice" {
		t.Fatalf("started %+v, want a RUNNING run by alice", started)
	}
	<-svc.reached
	running := stored(t, store, started.ID)
	if running.Status != rec.RunRunning || running.Checked != 2 || len(running.Findings) != 2 || running.FinishedAt != nil ||
		running.Phase != rec.PhaseComparing || len(running.OrphanScans) != 0 {
		t.Fatalf("held run: %s in %s, %d checked, %d findings, finished %v, orphan scans %v; want RUNNING, COMPARING, "+
			"after its first page of 2 orders, 2 findings", running.Status, running.Phase, running.Checked, len(running.Findings),
			running.FinishedAt, running.OrphanScans)
	}
	_, err = r.Start(context.Background(), "bob", rec.Scope{})
	if !errors.Is(err, app.ErrRunInProgress) || !strings.Contains(err.Error(), fmt.Sprintf("run %d ", started.ID)) {
		t.Fatalf("a second start while run %d runs: %v, want ErrRunInProgress naming it", started.ID, err)
	}

	close(svc.gate)
	poll.Until(t, 10*time.Second, "the run finishes", func() bool { return stored(t, store, started.ID).Status != rec.RunRunning })
	done := stored(t, store, started.ID)
	if done.Status != rec.RunSucceeded || done.Checked != 3 || len(done.Findings) != 3 || done.FinishedAt == nil || done.Actions != 3 {
		t.Fatalf("finished run: %s (%s), %d checked, %d findings, %d actions; want SUCCEEDED over 3 orders with 3 findings and actions",
			done.Status, done.Error, done.Checked, len(done.Findings), done.Actions)
	}
	if _, err := r.Start(context.Background(), "bob", rec.Scope{OrderIDs: []string{"O-1"}}); err != nil {
		t.Fatalf("a start after the run finished: %v", err)
	}
}

// TestAnAbandonedRunIsMarkedFailed: a run recorded RUNNING by a process
// that died is marked FAILED when a reconciler starts serving after its
// heartbeat went stale; a live run's heartbeat keeps it RUNNING.
func TestAnAbandonedRunIsMarkedFailed(t *testing.T) {
	svc := newServices(paidButLost("O-1"))
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r, store, _ := newReconcilerAt(t, svc, time.Minute, clock)
	ctx := context.Background()
	// The crashed process: it recorded the run and never finished it.
	dead, err := store.StartRun(ctx, "the process that crashed", rec.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Start(ctx, "alice", rec.Scope{}); !errors.Is(err, app.ErrRunInProgress) {
		t.Fatalf("a start while the dead run's heartbeat is fresh: %v, want ErrRunInProgress", err)
	}

	mu.Lock()
	now = now.Add(2 * app.DefaultConfig().AbandonAfter)
	mu.Unlock()
	serve(t, r) // the restart
	poll.Until(t, 10*time.Second, "the dead run is marked", func() bool { return stored(t, store, dead.ID).Status != rec.RunRunning })
	got := stored(t, store, dead.ID)
	if got.Status != rec.RunFailed || !strings.HasPrefix(got.Error, "abandoned: ") || got.FinishedAt == nil {
		t.Fatalf("dead run: %s %q finished %v, want FAILED, abandoned", got.Status, got.Error, got.FinishedAt)
	}
	next, err := r.Start(ctx, "alice", rec.Scope{})
	if err != nil {
		t.Fatalf("a start after the dead run was marked: %v", err)
	}
	poll.Until(t, 10*time.Second, "the new run finishes", func() bool { return stored(t, store, next.ID).Status != rec.RunRunning })
	if got := stored(t, store, next.ID); got.Status != rec.RunSucceeded || got.Checked != 1 {
		t.Fatalf("new run: %s %q, %d checked", got.Status, got.Error, got.Checked)
	}
}

// TestAFailedActionSaysFailedOnce: a compensation that fails is recorded
// with its status once, then the service's error.
func TestAFailedActionSaysFailedOnce(t *testing.T) {
	svc := newServices(cancelledAndCharged("O-1"))
	svc.failing = true
	r, _, _ := newReconciler(t, svc, time.Minute)
	run, err := r.Run(context.Background(), "test", rec.Scope{})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Findings) != 1 {
		t.Fatalf("%d findings, want 1", len(run.Findings))
	}
	outcome := run.Findings[0].Outcome
	if want := "FAILED: " + app.ErrUnavailable.Error(); !strings.HasPrefix(outcome, want) {
		t.Fatalf("outcome %q, want it to begin %q", outcome, want)
	}
}

// heldEffects is the services with a gate on one consumer's list of the
// orders it holds effects for: the orphan pass's first read of it waits
// at the gate until the test opens it.
type heldEffects struct {
	*services
	service string
	once    sync.Once
	reached chan struct{} // closed when a read waits at the gate
	gate    chan struct{} // closed by the test
}

func (h *heldEffects) EffectOrders(ctx context.Context, service, after string, before time.Time, limit int) ([]string, string, error) {
	if service == h.service {
		h.once.Do(func() { close(h.reached) })
		select {
		case <-h.gate:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return h.services.EffectOrders(ctx, service, after, before, limit)
}

// TestARunReportsItsProgress: a run held in its orphan pass, at its first
// read of the inventory service's orders, shows in its stored row that it
// compared every order, is in the ORPHANS phase (the comparison's span
// ended when it began) and read the payment service's orders to their end,
// page by page, naming its orphan; let go, it ends with every consumer's
// list read and both phases' spans closed.
func TestARunReportsItsProgress(t *testing.T) {
	svc := newServices(paidButLost("O-1"), paidButLost("O-2"), paidButLost("O-3"))
	known := []string{"O-1", "O-2", "O-3"}
	svc.effects = map[string][]string{
		rec.ServicePayment:      {"O-1", "O-2", "O-3", "O-lost"},
		rec.ServiceInventory:    known,
		rec.ServicePoints:       known,
		rec.ServiceNotification: known,
	}
	h := &heldEffects{services: svc, service: rec.ServiceInventory, reached: make(chan struct{}), gate: make(chan struct{})}
	r, store, _ := newReconciler(t, h, time.Minute) // two orders, and two effect orders, a page
	serve(t, r)
	started, err := r.Start(context.Background(), "alice", rec.Scope{MinAge: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	<-h.reached
	running := stored(t, store, started.ID)
	wantScans := []rec.OrphanScan{
		// Four orders in pages of two: the second page is full, so a third,
		// empty, ends the list.
		{Service: rec.ServicePayment, Pages: 3, Orders: 4, Orphans: 1, Done: true},
		{Service: rec.ServiceInventory}, {Service: rec.ServicePoints}, {Service: rec.ServiceNotification},
	}
	if running.Status != rec.RunRunning || running.Phase != rec.PhaseOrphans || running.Checked != 3 ||
		!slices.Equal(running.OrphanScans, wantScans) {
		t.Fatalf("run held in its orphan pass: %s in %s, %d checked, scans %+v; want RUNNING in ORPHANS, 3 checked, scans %+v",
			running.Status, running.Phase, running.Checked, running.OrphanScans, wantScans)
	}
	phases := running.Phases()
	if len(phases) != 2 || phases[0].Phase != rec.PhaseComparing || phases[0].FinishedAt == nil ||
		phases[1].Phase != rec.PhaseOrphans || phases[1].FinishedAt != nil || phases[1].StartedAt.Before(running.StartedAt) {
		t.Fatalf("phases of the held run %+v: want COMPARING ended, then ORPHANS going on", phases)
	}

	close(h.gate)
	poll.Until(t, 10*time.Second, "the run finishes", func() bool { return stored(t, store, started.ID).Status != rec.RunRunning })
	done := stored(t, store, started.ID)
	for i := 1; i < len(wantScans); i++ {
		// Three orders in pages of two.
		wantScans[i] = rec.OrphanScan{Service: wantScans[i].Service, Pages: 2, Orders: 3, Done: true}
	}
	if done.Status != rec.RunSucceeded || done.Phase != rec.PhaseOrphans || !slices.Equal(done.OrphanScans, wantScans) {
		t.Fatalf("finished run: %s (%s) in %s, scans %+v; want SUCCEEDED in ORPHANS, scans %+v",
			done.Status, done.Error, done.Phase, done.OrphanScans, wantScans)
	}
	phases = done.Phases()
	if len(phases) != 2 || phases[1].FinishedAt == nil || !phases[0].FinishedAt.Equal(phases[1].StartedAt) {
		t.Fatalf("phases of the finished run %+v: want COMPARING, then ORPHANS until the end", phases)
	}
}
