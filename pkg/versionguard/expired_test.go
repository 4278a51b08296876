package versionguard_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// TestTakeExpired parks events, ages some of them, and takes out exactly
// the ones past the deadline whose aggregate nobody else holds.
func TestTakeExpired(t *testing.T) {
	ctx := context.Background()
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
	g := versionguard.New("c", chain, func(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
		return next[env.EventType], nil
	})
	handle := func(id string, typ event.Type, agg string, version int64) {
		t.Helper()
		env := event.Envelope{EventID: id, EventType: typ, AggregateID: agg, AggregateVersion: version}
		if err := versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
			_, err := g.Handle(ctx, uow, env)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	handle("E-old-created", event.OrderCreated, "O-OLD", 1)
	handle("E-old-paid", event.OrderPaid, "O-OLD", 3) // waits for OrderCheckedOut v2
	handle("E-locked", event.OrderPaid, "O-LOCKED", 3)
	handle("E-young", event.OrderPaid, "O-YOUNG", 3)
	if _, err := db.ExecContext(ctx, `UPDATE parked_events SET parked_at = now() - interval '1 hour' WHERE event_id <> 'E-young'`); err != nil {
		t.Fatal(err)
	}

	// Another transaction holds O-LOCKED, as a consumer applying its
	// predecessor would: the sweep skips it rather than wait.
	holder, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Releases the lock should the test stop before its own Rollback;
	// after that Rollback it is a no-op.
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, `SELECT 1 FROM aggregate_versions WHERE aggregate_id = 'O-LOCKED' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	var got []versionguard.Expired
	if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		got, err = g.TakeExpired(ctx, tx, time.Minute, 10)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Event.EventID != "E-old-paid" {
		t.Fatalf("took %+v, want only E-old-paid", got)
	}
	e := got[0]
	if e.Version != 1 || e.State != "CREATED" || len(e.Needs) != 1 || e.Needs[0] != "PENDING_PAYMENT" ||
		e.Event.AggregateVersion != 3 || time.Since(e.ParkedAt) < 59*time.Minute {
		t.Errorf("expired event %+v", e)
	}
	if m := e.Missing(); !strings.Contains(m, "2..2") || !strings.Contains(m, "CREATED") || !strings.Contains(m, "PENDING_PAYMENT") {
		t.Errorf("Missing() = %q, want the version range 2..2 and the states", m)
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n, err := g.CountParked(ctx, db); err != nil || n != 2 {
		t.Fatalf("%d parked (%v), want E-locked and E-young left", n, err)
	}

	// A rolled-back sweep leaves the event parked.
	_ = postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		got, err = g.TakeExpired(ctx, tx, time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return context.Canceled
	})
	if len(got) != 1 || got[0].Event.EventID != "E-locked" {
		t.Fatalf("second sweep took %+v, want E-locked", got)
	}
	if n, err := g.CountParked(ctx, db); err != nil || n != 2 {
		t.Fatalf("%d parked (%v) after a rolled-back sweep, want 2", n, err)
	}
}
