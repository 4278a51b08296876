package inbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/fstest"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// A ledger consumer like points: it earns on OrderPaid, reverses on
// OrderRefunded and ignores every other event of the order.
var ledgerMigration = postgres.MigrationSet{Name: "ledger", FS: fstest.MapFS{"00001_ledger.sql": {Data: []byte(`
-- +goose Up
CREATE TABLE ledger (id BIGSERIAL PRIMARY KEY, aggregate_id TEXT NOT NULL, entry TEXT NOT NULL, version BIGINT NOT NULL);
`)}}}

func ledgerProcessor(db *sqlx.DB) *inbox.Processor {
	transitions := versionguard.Transitions{
		event.OrderPaid:     {versionguard.InitialState},
		event.OrderRefunded: {"EARNED"},
	}
	next := map[event.Type]string{event.OrderPaid: "EARNED", event.OrderRefunded: "REVERSED"}
	guard := versionguard.New("ledger", transitions, func(ctx context.Context, tx *sqlx.Tx, env event.Envelope, _ string) (string, error) {
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger (aggregate_id, entry, version) VALUES ($1, $2, $3)`,
			env.AggregateID, string(env.EventType), env.AggregateVersion)
		return next[env.EventType], err
	})
	return inbox.NewProcessor(db, "ledger", guard)
}

// lifecycle is one order's events in order: every order is paid; some are
// refunded at once, some after a rejected refund, some never.
func lifecycle(r *rand.Rand, order string) []event.Envelope {
	types := []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid}
	switch r.IntN(3) {
	case 0:
		types = append(types, event.OrderRefundRequested, event.OrderRefunded)
	case 1:
		types = append(types, event.OrderRefundRequested, event.OrderRefundRejected, event.OrderRefundRequested, event.OrderRefunded)
	}
	out := make([]event.Envelope, len(types))
	for i, t := range types {
		out[i] = event.Envelope{EventID: fmt.Sprintf("%s-E%d", order, i+1), EventType: t, AggregateID: order, AggregateVersion: int64(i + 1)}
	}
	return out
}

func ledgerOf(t *testing.T, db *sqlx.DB) map[string]string {
	t.Helper()
	var rows []struct {
		Aggregate string `db:"aggregate_id"`
		Entries   string `db:"entries"`
	}
	if err := db.Select(&rows, `SELECT aggregate_id, string_agg(entry || ':' || version, ',' ORDER BY id) AS entries FROM ledger GROUP BY aggregate_id`); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		out[r.Aggregate] = r.Entries
	}
	return out
}

// TestAnyInterleavingConvergesToTheOrderedResult is the tutorial's ordering
// property: random interleavings of duplicated and reordered event streams
// for many orders end in the same ledger as the ordered stream, with every
// order's entries in version order.
func TestAnyInterleavingConvergesToTheOrderedResult(t *testing.T) {
	const orders = 40
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, seed))
			var ordered []event.Envelope
			for i := range orders {
				ordered = append(ordered, lifecycle(r, fmt.Sprintf("O-%d", i))...)
			}

			wantDB, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), ledgerMigration)
			want := ledgerProcessor(wantDB)
			for _, env := range ordered {
				if _, err := want.Process(context.Background(), env); err != nil {
					t.Fatal(err)
				}
			}

			// Every event delivered one to three times, in a random order.
			var chaotic []event.Envelope
			for _, env := range ordered {
				for range 1 + r.IntN(3) {
					chaotic = append(chaotic, env)
				}
			}
			r.Shuffle(len(chaotic), func(i, j int) { chaotic[i], chaotic[j] = chaotic[j], chaotic[i] })
			gotDB, _ := postgrestest.NewDatabase(t, inbox.Schema(), versionguard.Schema(), ledgerMigration)
			got := ledgerProcessor(gotDB)
			for _, env := range chaotic {
				if _, err := got.Process(context.Background(), env); err != nil {
					t.Fatal(err)
				}
			}

			wantLedger, gotLedger := ledgerOf(t, wantDB), ledgerOf(t, gotDB)
			if len(wantLedger) != orders {
				t.Fatalf("ordered stream gave %d orders a ledger, want %d", len(wantLedger), orders)
			}
			for order, entries := range wantLedger {
				if gotLedger[order] != entries {
					t.Errorf("%s: %d deliveries in random order gave %q, the ordered stream %q", order, len(chaotic), gotLedger[order], entries)
				}
			}
			if parked, err := versionguard.ParkedCount(context.Background(), gotDB, "ledger"); err != nil || parked != 0 {
				t.Errorf("%d events still parked (%v), want 0", parked, err)
			}
		})
	}
}
