package versionguard_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// TestInUnitOfWork: the work fn queues runs after fn in the order queued
// (what a queued function queues too, last) and sees fn's writes; what it
// queues for after the commit runs once the rows are visible to another
// connection; an error or a panic rolls back and runs nothing queued, and
// only ErrContended runs fn once more, locking.
func TestInUnitOfWork(t *testing.T) {
	tests := []struct {
		name      string
		fail      func(run int) error // the last queued statement's answer on each run
		panics    bool
		wantErr   error
		wantSteps string
		wantRows  int
	}{
		{"committed", func(int) error { return nil }, false, nil,
			"[fn:false before:2 before:2 queued:2 after:2]", 2},
		{"contended once: once more, locking", func(run int) error {
			if run == 1 {
				return versionguard.ErrContended
			}
			return nil
		}, false, nil, "[fn:false before:2 before:2 queued:2 fn:true before:2 before:2 queued:2 after:2]", 2},
		{"contended twice: the error stands", func(int) error { return versionguard.ErrContended }, false, versionguard.ErrContended,
			"[fn:false before:2 before:2 queued:2 fn:true before:2 before:2 queued:2]", 0},
		{"another error: no second run", func(int) error { return errBoom }, false, errBoom,
			"[fn:false before:2 before:2 queued:2]", 0},
		{"a panic rolls back and is raised again", nil, true, nil, "[fn:false]", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
			var steps []string
			runs := 0
			work := func(uow *versionguard.UnitOfWork) error {
				runs++
				run := runs
				ctx := context.Background()
				steps = append(steps, fmt.Sprintf("fn:%v", uow.Locking()))
				for _, id := range []string{"A", "B"} {
					if _, err := uow.Tx().ExecContext(ctx, `INSERT INTO aggregate_versions (consumer, aggregate_id, version, state) VALUES ('c', $1, 1, 'S')`, id); err != nil {
						return err
					}
				}
				if tt.panics {
					panic("apply panicked")
				}
				uow.AfterCommit(func() { steps = append(steps, fmt.Sprintf("after:%d", count(t, db))) })
				uow.BeforeCommit(func(ctx context.Context) error {
					steps = append(steps, fmt.Sprintf("before:%d", countIn(ctx, t, uow.Tx())))
					uow.BeforeCommit(func(ctx context.Context) error {
						steps = append(steps, fmt.Sprintf("queued:%d", countIn(ctx, t, uow.Tx())))
						return tt.fail(run)
					})
					return nil
				})
				uow.BeforeCommit(func(ctx context.Context) error {
					steps = append(steps, fmt.Sprintf("before:%d", countIn(ctx, t, uow.Tx())))
					return nil
				})
				return nil
			}
			var err error
			func() {
				defer func() {
					if p := recover(); (p != nil) != tt.panics {
						t.Errorf("recovered %v, want a panic %v", p, tt.panics)
					}
				}()
				err = versionguard.InUnitOfWork(context.Background(), db, work)
			}()
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("InUnitOfWork = %v, want %v", err, tt.wantErr)
			}
			if got := fmt.Sprint(steps); got != tt.wantSteps {
				t.Errorf("steps %s, want %s", got, tt.wantSteps)
			}
			if n := count(t, db); n != tt.wantRows {
				t.Errorf("%d rows committed, want %d", n, tt.wantRows)
			}
		})
	}
}

var errBoom = errors.New("boom")

func count(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	return countIn(context.Background(), t, db)
}

func countIn(ctx context.Context, t *testing.T, q sqlx.QueryerContext) int {
	t.Helper()
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM aggregate_versions`); err != nil {
		t.Fatal(err)
	}
	return n
}
