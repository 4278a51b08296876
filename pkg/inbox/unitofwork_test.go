package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// TestBeforeCommitRunsLastAndOnceMoreLockingWhenContended applies one
// event whose apply writes an effect and queues a statement with the unit
// of work's BeforeCommit. The queued statement sees every write of the
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
			guard := versionguard.NewBatch("test-consumer", versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}},
				func(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
					runs = append(runs, uow.Locking())
					env := batch[0].Env
					if err := addEffect(ctx, uow.Tx(), env); err != nil {
						return nil, err
					}
					uow.BeforeCommit(func(ctx context.Context) error {
						// Last: the guard has recorded the new version already.
						state, version, err := versionguard.State(ctx, uow.Tx(), "test-consumer", env.AggregateID)
						if err != nil {
							return fmt.Errorf("before commit: %w", err)
						}
						if state != "PAID" || version != env.AggregateVersion {
							return fmt.Errorf("before commit: version %s v%d, want PAID v%d", state, version, env.AggregateVersion)
						}
						if len(runs) <= tt.contended {
							return versionguard.ErrContended
						}
						return nil
					})
					return []string{"PAID"}, nil
				})
			p := inbox.NewProcessor(db, "test-consumer", guard)
			out, err := p.Process(context.Background(), env("E-1", "O-1", event.OrderPaid, 3))
			if tt.wantErr != (err != nil) || (err != nil && !errors.Is(err, versionguard.ErrContended)) {
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

// TestAfterCommitRunsOnceCommitted: what an apply queues with its unit of
// work's AfterCommit, in the batch form and the single-event form alike,
// runs once its transaction has committed (its effect is visible on
// another connection), once even when a contended first run was rolled
// back, and never when the transaction fails.
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
	paid := versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}}
	forms := []struct {
		name  string
		guard func(step stepFunc) *versionguard.Guard
	}{
		{"batch", func(step stepFunc) *versionguard.Guard {
			return versionguard.NewBatch("test-consumer", paid,
				func(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
					if err := step(ctx, uow, batch[0].Env); err != nil {
						return nil, err
					}
					return []string{"PAID"}, nil
				})
		}},
		{"single event", func(step stepFunc) *versionguard.Guard {
			return versionguard.New("test-consumer", paid,
				func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
					if err := step(ctx, uow, env); err != nil {
						return "", err
					}
					return "PAID", nil
				})
		}},
	}
	for _, form := range forms {
		for _, tt := range tests {
			t.Run(form.name+"/"+tt.name, func(t *testing.T) {
				db, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), effectsSet)
				var runs int
				var seen [][]string // the effects another connection saw at each call
				guard := form.guard(func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope) error {
					runs++
					if err := addEffect(ctx, uow.Tx(), env); err != nil {
						return err
					}
					uow.AfterCommit(func() { seen = append(seen, effects(t, db, env.AggregateID)) })
					uow.BeforeCommit(contendedIf(runs <= tt.contended))
					return nil
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
	}
}

// stepFunc writes env's effect in uow, queues a function to run after the
// commit, and queues one before it that reports whether this run is
// contended.
type stepFunc func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope) error

// contendedIf is a statement to queue with BeforeCommit that reports
// ErrContended when contended.
func contendedIf(contended bool) func(context.Context) error {
	return func(context.Context) error {
		if contended {
			return versionguard.ErrContended
		}
		return nil
	}
}

func addEffect(ctx context.Context, tx *sqlx.Tx, env event.Envelope) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO effects (aggregate_id, event_type, version) VALUES ($1, $2, $3)`,
		env.AggregateID, string(env.EventType), env.AggregateVersion)
	return err
}
