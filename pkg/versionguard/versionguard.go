// Package versionguard stops reordered events from moving a consumer's view
// of an aggregate backwards (the tutorial's apply_event, DESIGN §5).
//
// Per (consumer, aggregate) it keeps the last applied aggregateVersion and
// the consumer's own small state. An event at or below that version is
// IGNORED_STALE_EVENT; an event whose type is legal from the current state is
// APPLIED; any other newer event is WAITING_FOR_GAP: parked, and applied as
// soon as the predecessor it needs has been applied.
package versionguard

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates aggregate_versions and parked_events.
func Schema() postgres.MigrationSet { return postgres.EmbeddedSet("versionguard", migrations) }

// Outcome is what the guard did with an event.
type Outcome string

// The outcomes of the tutorial's apply_event.
const (
	Applied       Outcome = "APPLIED"
	IgnoredStale  Outcome = "IGNORED_STALE_EVENT"
	WaitingForGap Outcome = "WAITING_FOR_GAP"
)

// InitialState is a consumer's state for an aggregate it has never seen.
const InitialState = "NONE"

// Transitions lists, for every event type a consumer handles, the states it
// may be applied from. Event types not listed are not the consumer's business.
type Transitions map[event.Type][]string

// Handles reports whether the consumer has any transition for t.
func (t Transitions) Handles(et event.Type) bool {
	_, ok := t[et]
	return ok
}

func (t Transitions) allows(state string, et event.Type) bool {
	return slices.Contains(t[et], state)
}

// ApplyFunc performs the side effect of env inside tx, given the consumer's
// current state for the aggregate, and returns the new state.
type ApplyFunc func(ctx context.Context, tx *sqlx.Tx, env event.Envelope, state string) (string, error)

// Guard decides and applies events for one consumer.
type Guard struct {
	consumer    string
	transitions Transitions
	apply       ApplyFunc
}

// New returns a guard for consumer.
func New(consumer string, transitions Transitions, apply ApplyFunc) *Guard {
	return &Guard{consumer: consumer, transitions: transitions, apply: apply}
}

// Transitions returns the guard's transition table.
func (g *Guard) Transitions() Transitions { return g.transitions }

type aggregateRow struct {
	Version int64  `db:"version"`
	State   string `db:"state"`
}

// Handle applies, ignores or parks env inside tx. The aggregate's row is
// locked for the rest of the transaction, so two events of one aggregate are
// never decided concurrently even across consumer instances.
func (g *Guard) Handle(ctx context.Context, tx *sqlx.Tx, env event.Envelope) (Outcome, error) {
	var cur aggregateRow
	err := tx.GetContext(ctx, &cur, `
		INSERT INTO aggregate_versions (consumer, aggregate_id, version, state)
		VALUES ($1, $2, 0, $3)
		ON CONFLICT (consumer, aggregate_id) DO UPDATE SET version = aggregate_versions.version
		RETURNING version, state`, g.consumer, env.AggregateID, InitialState)
	if err != nil {
		return "", fmt.Errorf("lock aggregate version: %w", err)
	}
	if env.AggregateVersion <= cur.Version {
		return IgnoredStale, nil
	}
	if !g.transitions.allows(cur.State, env.EventType) {
		if err := g.park(ctx, tx, env); err != nil {
			return "", err
		}
		return WaitingForGap, nil
	}
	next, err := g.apply(ctx, tx, env, cur.State)
	if err != nil {
		return "", err
	}
	cur = aggregateRow{Version: env.AggregateVersion, State: next}
	if cur, err = g.drainParked(ctx, tx, env.AggregateID, cur); err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `
		UPDATE aggregate_versions SET version = $3, state = $4, updated_at = now()
		WHERE consumer = $1 AND aggregate_id = $2`, g.consumer, env.AggregateID, cur.Version, cur.State); err != nil {
		return "", fmt.Errorf("record aggregate version: %w", err)
	}
	return Applied, nil
}

func (g *Guard) park(ctx context.Context, tx *sqlx.Tx, env event.Envelope) error {
	payload, err := json.Marshal(env)
	if err != nil {
		return fmt.Errorf("encode parked event: %w", err)
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO parked_events (consumer, event_id, aggregate_id, aggregate_version, event_type, payload)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (consumer, event_id) DO NOTHING`,
		g.consumer, env.EventID, env.AggregateID, env.AggregateVersion, string(env.EventType), payload)
	if err != nil {
		return fmt.Errorf("park event: %w", err)
	}
	return nil
}

// drainParked applies the aggregate's parked events that have become
// applicable, in version order, and drops the ones that became stale.
func (g *Guard) drainParked(ctx context.Context, tx *sqlx.Tx, aggregateID string, cur aggregateRow) (aggregateRow, error) {
	var parked []struct {
		EventID string `db:"event_id"`
		Payload []byte `db:"payload"`
	}
	if err := tx.SelectContext(ctx, &parked, `
		SELECT event_id, payload FROM parked_events
		WHERE consumer = $1 AND aggregate_id = $2
		ORDER BY aggregate_version`, g.consumer, aggregateID); err != nil {
		return cur, fmt.Errorf("load parked events: %w", err)
	}
	for _, p := range parked {
		var env event.Envelope
		if err := json.Unmarshal(p.Payload, &env); err != nil {
			return cur, fmt.Errorf("decode parked event %s: %w", p.EventID, err)
		}
		switch {
		case env.AggregateVersion <= cur.Version:
		case g.transitions.allows(cur.State, env.EventType):
			next, err := g.apply(ctx, tx, env, cur.State)
			if err != nil {
				return cur, err
			}
			cur = aggregateRow{Version: env.AggregateVersion, State: next}
		default:
			return cur, nil
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM parked_events WHERE consumer = $1 AND event_id = $2`,
			g.consumer, p.EventID); err != nil {
			return cur, fmt.Errorf("unpark event %s: %w", p.EventID, err)
		}
	}
	return cur, nil
}

// State returns the consumer's state and last applied version for an aggregate.
func State(ctx context.Context, q sqlx.QueryerContext, consumer, aggregateID string) (string, int64, error) {
	var row aggregateRow
	err := sqlx.GetContext(ctx, q, &row, `SELECT version, state FROM aggregate_versions WHERE consumer = $1 AND aggregate_id = $2`,
		consumer, aggregateID)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return InitialState, 0, nil
		}
		return "", 0, fmt.Errorf("read aggregate state: %w", err)
	}
	return row.State, row.Version, nil
}

// ParkedCount counts the consumer's parked events.
func ParkedCount(ctx context.Context, q sqlx.QueryerContext, consumer string) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM parked_events WHERE consumer = $1`, consumer); err != nil {
		return 0, fmt.Errorf("count parked events: %w", err)
	}
	return n, nil
}
