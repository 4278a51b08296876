package outbox_test

import (
	"context"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// TestLaterRowWaitsForAnEarlierOneBackingOff holds an order's first row in
// backoff (as a failed publish leaves it) while a later row of the same
// order and a row of another order are due: the other order's row goes
// out, the later row waits, and once the first is due both leave in order.
func TestLaterRowWaitsForAnEarlierOneBackingOff(t *testing.T) {
	db, b, topic := setup(t)
	ctx := context.Background()
	first, later, other := paid(t, topic, "O-1", 2), paid(t, topic, "O-1", 3), paid(t, topic, "O-9", 2)
	add := func(msgs ...outbox.Message) {
		t.Helper()
		if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
			for _, m := range msgs {
				if err := outbox.Add(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	due := func(eventID, when string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, `UPDATE outbox_events SET attempts = 1, next_attempt_at = `+when+` WHERE event_id = $1`, eventID); err != nil {
			t.Fatal(err)
		}
	}
	status := func(eventID string) string {
		t.Helper()
		st, err := outbox.Lookup(ctx, db, eventID)
		if err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	add(first)
	due(first.EventID, "now() + interval '1 hour'")
	add(later, other)

	relay := newRelay(t, db, b)
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if got := [3]string{status(first.EventID), status(later.EventID), status(other.EventID)}; got != [3]string{outbox.StatusPending, outbox.StatusPending, outbox.StatusSent} {
		t.Fatalf("while O-1's first row backs off: first, later, other = %v, want PENDING, PENDING, SENT", got)
	}

	due(first.EventID, "now()")
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range consumeAll(t, b, topic, 3) {
		if string(r.Key) != "O-1" {
			continue
		}
		for _, h := range r.Headers {
			if h.Key == event.HeaderEventID {
				ids = append(ids, string(h.Value))
			}
		}
	}
	if len(ids) != 2 || ids[0] != first.EventID || ids[1] != later.EventID {
		t.Fatalf("O-1's records = %v, want %s then %s", ids, first.EventID, later.EventID)
	}
}
