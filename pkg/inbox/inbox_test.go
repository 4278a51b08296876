package inbox_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// effects records every side effect, so tests count them instead of
// trusting the outcome a handler reports.
var effectsSet = postgres.MigrationSet{Name: "test", FS: effectsMigration}

var effectsMigration = fstest.MapFS{"00001_effects.sql": {Data: []byte(`
-- +goose Up
CREATE TABLE effects (id BIGSERIAL PRIMARY KEY, aggregate_id TEXT, event_type TEXT, version BIGINT);
`)}}

func newProcessor(t *testing.T) (*inbox.Processor, *sqlx.DB) {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t,
		inbox.Schema(),
		versionguard.Schema(),
		postgres.MigrationSet{Name: "test", FS: effectsMigration},
	)
	transitions := versionguard.Transitions{
		event.OrderCreated:  {versionguard.InitialState},
		event.OrderPaid:     {versionguard.InitialState, "CREATED"},
		event.OrderRefunded: {"PAID"},
	}
	next := map[event.Type]string{event.OrderCreated: "CREATED", event.OrderPaid: "PAID", event.OrderRefunded: "REFUNDED"}
	guard := versionguard.New("test-consumer", transitions,
		func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
			_, err := uow.Tx().ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ($1, $2, $3)`,
				env.AggregateID, string(env.EventType), env.AggregateVersion)
			return next[env.EventType], err
		})
	return inbox.NewProcessor(db, "test-consumer", guard), db
}

func env(id, aggregate string, t event.Type, version int64) event.Envelope {
	return event.Envelope{EventID: id, EventType: t, EventVersion: 1, AggregateID: aggregate, AggregateVersion: version, Data: []byte(`{}`)}
}

func effects(t *testing.T, db *sqlx.DB, aggregate string) []string {
	t.Helper()
	var rows []string
	if err := db.Select(&rows, `SELECT event_type || ':' || version FROM effects WHERE aggregate_id = $1 ORDER BY id`, aggregate); err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestProcessorOrderingAndDuplicates(t *testing.T) {
	tests := []struct {
		name     string
		events   []event.Envelope
		outcomes []versionguard.Outcome
		effects  []string
	}{
		{
			name:     "duplicate delivery applies once",
			events:   []event.Envelope{env("E-1", "O-1", event.OrderPaid, 3), env("E-1", "O-1", event.OrderPaid, 3)},
			outcomes: []versionguard.Outcome{versionguard.Applied, inbox.Duplicate},
			effects:  []string{"OrderPaid:3"},
		},
		{
			name:     "late CREATED after PAID is stale",
			events:   []event.Envelope{env("E-3", "O-1", event.OrderPaid, 3), env("E-1", "O-1", event.OrderCreated, 1)},
			outcomes: []versionguard.Outcome{versionguard.Applied, versionguard.IgnoredStale},
			effects:  []string{"OrderPaid:3"},
		},
		{
			name:     "REFUNDED before PAID waits, then both apply in order",
			events:   []event.Envelope{env("E-5", "O-1", event.OrderRefunded, 5), env("E-3", "O-1", event.OrderPaid, 3)},
			outcomes: []versionguard.Outcome{versionguard.WaitingForGap, versionguard.Applied},
			effects:  []string{"OrderPaid:3", "OrderRefunded:5"},
		},
		{
			name:     "parked event delivered again stays parked once",
			events:   []event.Envelope{env("E-5", "O-1", event.OrderRefunded, 5), env("E-5", "O-1", event.OrderRefunded, 5), env("E-3", "O-1", event.OrderPaid, 3)},
			outcomes: []versionguard.Outcome{versionguard.WaitingForGap, inbox.Duplicate, versionguard.Applied},
			effects:  []string{"OrderPaid:3", "OrderRefunded:5"},
		},
		{
			name:     "event types without a transition are not written",
			events:   []event.Envelope{env("E-2", "O-1", event.OrderCheckedOut, 2)},
			outcomes: []versionguard.Outcome{inbox.NotHandled},
			effects:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, db := newProcessor(t)
			for i, e := range tt.events {
				got, err := p.Process(context.Background(), e)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.outcomes[i] {
					t.Errorf("event %d (%s v%d): outcome %s, want %s", i, e.EventType, e.AggregateVersion, got, tt.outcomes[i])
				}
			}
			if got := effects(t, db, "O-1"); fmt.Sprint(got) != fmt.Sprint(tt.effects) {
				t.Errorf("effects %v, want %v", got, tt.effects)
			}
		})
	}
}

func TestProcessorConcurrentDuplicatesApplyOnce(t *testing.T) {
	p, db := newProcessor(t)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Process(context.Background(), env("E-DUP-1", "O-9", event.OrderPaid, 3)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := effects(t, db, "O-9"); len(got) != 1 {
		t.Fatalf("10 concurrent deliveries gave %d effects, want 1", len(got))
	}
	if n, err := inbox.Count(context.Background(), db, "test-consumer", "E-DUP-1"); err != nil || n != 1 {
		t.Fatalf("processed count %d (%v), want 1", n, err)
	}
	if r, err := inbox.Lookup(context.Background(), db, "test-consumer", "E-DUP-1"); err != nil || r.Duplicates != 9 {
		t.Fatalf("dedup record %+v (%v), want 9 duplicates: every copy after the first", r, err)
	}
	if r, err := inbox.Lookup(context.Background(), db, "test-consumer", "E-NEVER"); err != nil || r != (inbox.Record{}) {
		t.Fatalf("dedup record of an unseen event %+v (%v), want none", r, err)
	}
}
