package versionguard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Expired is a parked event taken out because its predecessor did not
// arrive in time, with the consumer's view of the aggregate at that moment:
// what an operator needs to find the missing event.
type Expired struct {
	Event    event.Envelope
	ParkedAt time.Time
	// Version and State are the aggregate's last applied version and the
	// consumer's state for it.
	Version int64
	State   string
	// Needs are the states Event applies from: the missing predecessor is
	// an event that would have moved the consumer to one of them.
	Needs []string
}

// Missing describes the predecessor the event waited for.
func (e Expired) Missing() string {
	needs := strings.Join(e.Needs, " or ")
	if e.Event.AggregateVersion-1 <= e.Version {
		return fmt.Sprintf("none: no version between %d and %d is missing, yet %s applies from %s and the consumer is at %s",
			e.Version, e.Event.AggregateVersion, e.Event.EventType, needs, e.State)
	}
	return fmt.Sprintf("a predecessor with a version in %d..%d that moves the consumer from %s (version %d) to %s",
		e.Version+1, e.Event.AggregateVersion-1, e.State, e.Version, needs)
}

// TakeExpired deletes, inside tx, up to limit of the consumer's events
// parked for longer than olderThan and returns them, oldest first. It locks
// each event's aggregate row as Handle does, so an event is either taken
// here or applied by a predecessor arriving at the same moment, never both;
// rows another transaction holds are skipped (SKIP LOCKED), so replicas
// sweeping at once share the work instead of waiting on each other. The
// deletion commits with tx: the caller records the dead letters in tx
// first.
func (g *Guard) TakeExpired(ctx context.Context, tx *sqlx.Tx, olderThan time.Duration, limit int) ([]Expired, error) {
	var rows []struct {
		Payload  []byte    `db:"payload"`
		ParkedAt time.Time `db:"parked_at"`
		Version  int64     `db:"version"`
		State    string    `db:"state"`
	}
	if err := tx.SelectContext(ctx, &rows, `
		WITH expired AS (
			SELECT p.event_id, p.payload, p.parked_at, p.aggregate_version, a.version, a.state
			FROM parked_events p
			JOIN aggregate_versions a ON a.consumer = p.consumer AND a.aggregate_id = p.aggregate_id
			WHERE p.consumer = $1 AND p.parked_at < now() - $2::bigint * interval '1 microsecond'
			ORDER BY p.parked_at, p.aggregate_version
			LIMIT $3
			FOR UPDATE OF p, a SKIP LOCKED
		)
		DELETE FROM parked_events p USING expired e
		WHERE p.consumer = $1 AND p.event_id = e.event_id
		RETURNING e.payload, e.parked_at, e.version, e.state`,
		g.consumer, olderThan.Microseconds(), limit); err != nil {
		return nil, fmt.Errorf("take expired parked events: %w", err)
	}
	out := make([]Expired, len(rows))
	for i, r := range rows {
		var env event.Envelope
		if err := json.Unmarshal(r.Payload, &env); err != nil {
			return nil, fmt.Errorf("decode parked event: %w", err)
		}
		out[i] = Expired{Event: env, ParkedAt: r.ParkedAt, Version: r.Version, State: r.State,
			Needs: slices.Clone(g.transitions[env.EventType])}
	}
	slices.SortFunc(out, func(a, b Expired) int {
		if c := a.ParkedAt.Compare(b.ParkedAt); c != 0 {
			return c
		}
		return int(a.Event.AggregateVersion - b.Event.AggregateVersion)
	})
	return out, nil
}

// CountParked counts the consumer's parked events.
func (g *Guard) CountParked(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	return ParkedCount(ctx, q, g.consumer)
}
