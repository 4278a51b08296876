// Package outboxtest holds what the tests of a service with an outbox
// share: one relay pass that delivers every pending row, and the rows of
// an aggregate read straight from the table, to hold against what the
// service's reconciliation view shows.
package outboxtest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// acceptAll is a relay sink that delivers everything.
type acceptAll struct{}

func (acceptAll) Send(_ context.Context, msgs []outbox.Message) (int, error) { return len(msgs), nil }

// RelayAll marks every pending outbox row of db SENT, as a relay pass does
// when everything it sends is taken.
func RelayAll(t testing.TB, db *sqlx.DB) {
	t.Helper()
	r, err := outbox.NewRelay(db, acceptAll{}, outbox.DefaultRelayConfig(), slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Row is an outbox row as stored.
type Row struct {
	EventID          string     `db:"event_id"`
	EventType        string     `db:"event_type"`
	AggregateVersion int64      `db:"aggregate_version"`
	Status           string     `db:"status"`
	Attempts         int        `db:"attempts"`
	CreatedAt        time.Time  `db:"created_at"`
	NextAttemptAt    time.Time  `db:"next_attempt_at"`
	SentAt           *time.Time `db:"sent_at"`
}

// Rows returns the outbox rows of aggregateID in the order they were
// written.
func Rows(t testing.TB, db *sqlx.DB, aggregateID string) []Row {
	t.Helper()
	var rows []Row
	if err := db.Select(&rows, `SELECT event_id, event_type, aggregate_version, status, attempts, created_at, next_attempt_at, sent_at
		FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, aggregateID); err != nil {
		t.Fatal(err)
	}
	return rows
}

// Shown is rows as a reconciliation view shows them, decoded from JSON
// into maps: times as Stamp writes them, sentAt only once sent, and [] when
// there are none.
func Shown(rows []Row) []any {
	out := make([]any, len(rows))
	for i, r := range rows {
		m := map[string]any{"eventId": r.EventID, "eventType": r.EventType, "aggregateVersion": float64(r.AggregateVersion),
			"status": r.Status, "attempts": float64(r.Attempts), "createdAt": Stamp(r.CreatedAt), "nextAttemptAt": Stamp(r.NextAttemptAt)}
		if r.SentAt != nil {
			m["sentAt"] = Stamp(*r.SentAt)
		}
		out[i] = m
	}
	return out
}

// Stamp is a stored time as the services' APIs write times.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
