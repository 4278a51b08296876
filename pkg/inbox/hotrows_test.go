package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// TestBeforeCommitRunsLastAndOnceMoreLockingWhenContended applies one
// event whose apply writes an effect and queues a statement with
// inbox.BeforeCommit. The queued statement sees every write of the
// transaction, the guard's record included; when it reports
// ErrContended, the whole transaction is rolled back and run again with
// Locking true, and the event's effect, dedup row and version are
// committed once.
func TestBeforeCommitRunsLastAndOnceMoreLockingWhenContended(t *testing.T) {
	tests := []struct {
		name      string
		contended int // how many runs report ErrContended
		wantRuns  []bool
		wantErr   bool
	}{
		{"uncontended: one run, not locking", 0, []bool{false}, false},
		{"contended once: a second run, locking", 1, []bool{false, true}, false},
		{"contended when locking too: the error stands, nothing committed", 2, []bool{false, true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), effectsSet)
			var runs []bool
			guard := versionguard.New("test-consumer", versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}},
				func(ctx context.Context, tx *sqlx.Tx, env event.Envelope, _ string) (string, error) {
					runs = append(runs, inbox.Locking(ctx))
					if _, err := tx.ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ($1, $2, $3)`,
						env.AggregateID, string(env.EventType), env.AggregateVersion); err != nil {
						return "", err
					}
					return "PAID", inbox.BeforeCommit(ctx, tx, func(ctx context.Context, tx *sqlx.Tx) error {
						// Last: the guard has recorded the new version already.
						state, version, err := versionguard.State(ctx, tx, "test-consumer", env.AggregateID)
						if err != nil {
							return fmt.Errorf("before commit: %w", err)
						}
						if state != "PAID" || version != env.AggregateVersion {
							return fmt.Errorf("before commit: version %s v%d, want PAID v%d", state, version, env.AggregateVersion)
						}
						if len(runs) <= tt.contended {
							return inbox.ErrContended
						}
						return nil
					})
				})
			p := inbox.NewProcessor(db, "test-consumer", guard)
			out, err := p.Process(context.Background(), env("E-1", "O-1", event.OrderPaid, 3))
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, inbox.ErrContended)) {
				t.Fatalf("process = %s, %v; want error %v", out, err, tt.wantErr)
			}
			if fmt.Sprint(runs) != fmt.Sprint(tt.wantRuns) {
				t.Errorf("runs locking = %v, want %v", runs, tt.wantRuns)
			}
			want, dedup := []string{"OrderPaid:3"}, 1
			if tt.wantErr {
				want, dedup = nil, 0
			}
			if got := effects(t, db, "O-1"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("effects = %v, want %v", got, want)
			}
			if n, err := inbox.Count(context.Background(), db, "test-consumer", "E-1"); err != nil || n != dedup {
				t.Errorf("dedup rows = %d (%v), want %d", n, err, dedup)
			}
		})
	}
}

// TestBeforeCommitOutsideAnInboxTransactionRunsAtOnce: an apply called in
// a transaction of its own still writes its hot rows.
func TestBeforeCommitOutsideAnInboxTransactionRunsAtOnce(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, effectsSet)
	err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return inbox.BeforeCommit(context.Background(), tx, func(ctx context.Context, tx *sqlx.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ('O-1', 'OrderPaid', 3)`)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := effects(t, db, "O-1"); fmt.Sprint(got) != "[OrderPaid:3]" {
		t.Errorf("effects = %v, want [OrderPaid:3]", got)
	}
}

// TestAfterCommitRunsOnceCommitted: what an apply queues with
// inbox.AfterCommit runs once its transaction has committed (its effect is
// visible on another connection), once even when a contended first run
// was rolled back, and never when the transaction fails; outside an inbox
// transaction it is not queued.
func TestAfterCommitRunsOnceCommitted(t *testing.T) {
	tests := []struct {
		name      string
		contended int // how many runs report ErrContended
		wantCalls int
	}{
		{"committed", 0, 1},
		{"committed on the second run", 1, 1},
		{"never committed", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), effectsSet)
			var runs int
			var seen [][]string // the effects another connection saw at each call
			guard := versionguard.New("test-consumer", versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}},
				func(ctx context.Context, tx *sqlx.Tx, env event.Envelope, _ string) (string, error) {
					runs++
					if _, err := tx.ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ($1, $2, $3)`,
						env.AggregateID, string(env.EventType), env.AggregateVersion); err != nil {
						return "", err
					}
					if !inbox.AfterCommit(ctx, func() { seen = append(seen, effects(t, db, env.AggregateID)) }) {
						return "", errors.New("AfterCommit did not queue inside an inbox transaction")
					}
					return "PAID", inbox.BeforeCommit(ctx, tx, func(context.Context, *sqlx.Tx) error {
						if runs <= tt.contended {
							return inbox.ErrContended
						}
						return nil
					})
				})
			p := inbox.NewProcessor(db, "test-consumer", guard)
			_, err := p.Process(context.Background(), env("E-1", "O-1", event.OrderPaid, 3))
			if (err != nil) != (tt.wantCalls == 0) {
				t.Fatalf("process: %v", err)
			}
			if len(seen) != tt.wantCalls {
				t.Fatalf("after-commit calls = %d, want %d", len(seen), tt.wantCalls)
			}
			for _, got := range seen {
				if fmt.Sprint(got) != "[OrderPaid:3]" {
					t.Errorf("at the after-commit call another connection saw effects %v, want [OrderPaid:3]", got)
				}
			}
		})
	}
	if inbox.AfterCommit(context.Background(), func() { t.Error("ran outside an inbox transaction") }) {
		t.Error("AfterCommit queued outside an inbox transaction")
	}
}
