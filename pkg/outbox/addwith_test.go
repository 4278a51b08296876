package outbox_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

func TestAddWithWritesTheRowsOnlyWithTheChange(t *testing.T) {
	const (
		insert = `INSERT INTO orders_t (order_id, status) VALUES ($1, $2) ON CONFLICT (order_id) DO NOTHING`
		update = `UPDATE orders_t SET status = $2 WHERE order_id = $1 AND status = $3`
	)
	tests := []struct {
		name   string
		change string
		args   []any
		// events is how many events of the order the change emits.
		events      int
		wantChanged bool
		wantStatus  string
	}{
		{name: "a new row with its event", change: insert, args: []any{"O-new", "NEW"}, events: 1, wantChanged: true, wantStatus: "NEW"},
		{name: "a conflicting insert writes no event", change: insert, args: []any{"O-1", "NEW"}, events: 1, wantStatus: "CREATED"},
		{name: "an update with two events", change: update, args: []any{"O-1", "PAID", "CREATED"}, events: 2, wantChanged: true, wantStatus: "PAID"},
		{name: "an update its guard refuses writes no event", change: update, args: []any{"O-1", "PAID", "CANCELLED"}, events: 2, wantStatus: "CREATED"},
		{name: "a change without events", change: update, args: []any{"O-1", "PAID", "CREATED"}, wantChanged: true, wantStatus: "PAID"},
		{name: "a refused change without events", change: update, args: []any{"O-1", "PAID", "CANCELLED"}, wantStatus: "CREATED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			db, _ := postgrestest.NewDatabase(t, outbox.Schema(), businessTable)
			if _, err := db.Exec(`INSERT INTO orders_t (order_id, status) VALUES ('O-1', 'CREATED')`); err != nil {
				t.Fatal(err)
			}
			id := tt.args[0].(string)
			var msgs []outbox.Message
			for v := range tt.events {
				msgs = append(msgs, paid(t, "orders", id, int64(v+2)))
			}
			// The caller's arguments with room to spare behind them: the
			// events' arguments must not be appended into that room.
			args := make([]any, len(tt.args), len(tt.args)+16)
			copy(args, tt.args)
			room := args[:cap(args)]
			for i := len(args); i < len(room); i++ {
				room[i] = "spare"
			}
			var changed bool
			if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
				var err error
				changed, err = outbox.AddWith(ctx, tx, tt.change, args, msgs...)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			for i, v := range room {
				want := any("spare")
				if i < len(tt.args) {
					want = tt.args[i]
				}
				if v != want {
					t.Errorf("AddWith wrote into its caller's arguments at %d: %v, was %v", i, v, want)
				}
			}
			var status string
			if err := db.Get(&status, `SELECT status FROM orders_t WHERE order_id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if status != tt.wantStatus {
				t.Errorf("status = %q, want %q", status, tt.wantStatus)
			}
			var rows []struct {
				EventID string `db:"event_id"`
				Version int64  `db:"aggregate_version"`
				Type    string `db:"event_type"`
				Topic   string `db:"topic"`
				Payload []byte `db:"payload"`
				Status  string `db:"status"`
			}
			if err := db.Select(&rows, `SELECT event_id, aggregate_version, event_type, topic, payload, status
				FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, id); err != nil {
				t.Fatal(err)
			}
			want := 0
			if tt.wantChanged {
				want = len(msgs)
			}
			if len(rows) != want {
				t.Fatalf("%d outbox rows, want %d", len(rows), want)
			}
			for i, row := range rows {
				m := msgs[i]
				if row.EventID != m.EventID || row.Version != m.AggregateVersion || row.Type != m.EventType ||
					row.Topic != m.Topic || row.Status != outbox.StatusPending {
					t.Errorf("row %d = %+v, want the event %s v%d %s on %s, PENDING", i, row, m.EventID, m.AggregateVersion, m.EventType, m.Topic)
				}
				if !sameJSON(t, row.Payload, m.Payload) {
					t.Errorf("row %d payload = %s, want %s", i, row.Payload, m.Payload)
				}
			}
		})
	}
}

// sameJSON reports whether a and b are the same JSON value (Postgres
// stores jsonb in its own key order and spacing).
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
