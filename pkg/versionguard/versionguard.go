// Package versionguard stops reordered events from moving a consumer's view
// of an aggregate backwards (the tutorial's apply_event; docs/design.md,
// Version guard and parking).
//
// Per (consumer, aggregate) it keeps the last applied aggregateVersion and
// the consumer's own small state. An event at or below that version is
// IGNORED_STALE_EVENT; an event whose type is legal from the current state is
// APPLIED; any other newer event is WAITING_FOR_GAP: parked, and applied as
// soon as the predecessor it needs has been applied. An old event whose type
// carries a fact of its own (LateFacts) is APPLIED_LATE_FACT: its per-fact
// effect is applied and the state stays where it is.
//
// The guard works in a consumer's unit of work (UnitOfWork): the one
// transaction of the event's dedup row, the guard's rows and the
// consumer's side effects, which it hands on to the consumer's apply
// function.
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
	"github.com/lib/pq"

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
	// AppliedLateFact: an event at or below the consumer's version whose
	// type carries a fact of its own (LateFacts) had its per-fact effect
	// applied; the consumer's state and version stay where they are.
	AppliedLateFact Outcome = "APPLIED_LATE_FACT"
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

// Decide is the guard's decision for env when the consumer stands at cur
// with its aggregate: IGNORED_STALE_EVENT at or below cur's version,
// APPLIED when the table allows env's type from cur's state, otherwise
// WAITING_FOR_GAP. It depends on nothing else, so deciding a delivered
// event and a parked one it drains are the same rule, and a fuzz test can
// check the rule alone.
func (t Transitions) Decide(cur Position, env event.Envelope) Outcome {
	switch {
	case env.AggregateVersion <= cur.Version:
		return IgnoredStale
	case !t.allows(cur.State, env.EventType):
		return WaitingForGap
	}
	return Applied
}

// StatesOf lists a domain's states as the Transitions table holds them,
// so a consumer's state machine is written once, with its own type, in its
// domain package.
func StatesOf[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// ApplyFunc performs the side effect of env in uow, given the consumer's
// current state for the aggregate, and returns the new state. It is the
// form of an apply that takes one event at a time; its adapters write in
// uow.Tx(), and what must run after the commit goes to uow.AfterCommit.
type ApplyFunc func(ctx context.Context, uow *UnitOfWork, env event.Envelope, state string) (string, error)

// Pending is an event the guard has decided to apply, with the consumer's
// current state for its aggregate.
type Pending struct {
	Env   event.Envelope
	State string
}

// BatchApplyFunc performs the side effects of batch in uow and returns
// the new state of each, in order. The events of one call belong to
// distinct aggregates, so a consumer can write them set-based (one
// statement per table, whatever the batch's size) and need not apply them
// one after the other. The consumer's adapters write in uow.Tx(); work
// that must come last goes to uow.BeforeCommit.
type BatchApplyFunc func(ctx context.Context, uow *UnitOfWork, batch []Pending) ([]string, error)

// FactFunc performs the per-fact effect of env in uow without changing
// the consumer's state for its aggregate.
type FactFunc func(ctx context.Context, uow *UnitOfWork, env event.Envelope) error

// LateFacts are the event types that carry a fact of their own (a refund,
// a returned payment) where a consumer's effect is one per fact (a message
// to the customer), not a state a newer event replaces. Such an event that
// arrives after a newer one (dead-lettered and replayed, say) would be
// ignored as stale and its fact lost; the guard applies it with Apply
// instead, and the consumer's state and version stay where they are.
type LateFacts struct {
	Types []event.Type
	Apply FactFunc
}

func (l LateFacts) applies(et event.Type) bool {
	return l.Apply != nil && slices.Contains(l.Types, et)
}

// Guard decides and applies events for one consumer.
type Guard struct {
	consumer    string
	transitions Transitions
	apply       BatchApplyFunc
	late        LateFacts
}

// New returns a guard for consumer that applies one event at a time.
func New(consumer string, transitions Transitions, apply ApplyFunc) *Guard {
	return NewBatch(consumer, transitions, func(ctx context.Context, uow *UnitOfWork, batch []Pending) ([]string, error) {
		states := make([]string, len(batch))
		for i, p := range batch {
			next, err := apply(ctx, uow, p.Env, p.State)
			if err != nil {
				return nil, err
			}
			states[i] = next
		}
		return states, nil
	})
}

// NewBatch returns a guard for consumer that hands the applicable events of
// distinct aggregates in a batch to apply in one call.
func NewBatch(consumer string, transitions Transitions, apply BatchApplyFunc) *Guard {
	return &Guard{consumer: consumer, transitions: transitions, apply: apply}
}

// WithLateFacts makes g apply late the facts of late's types instead of
// ignoring them as stale, and returns g.
func (g *Guard) WithLateFacts(late LateFacts) *Guard {
	g.late = late
	return g
}

// Transitions returns the guard's transition table.
func (g *Guard) Transitions() Transitions { return g.transitions }

// stale handles an event at or below the consumer's version: a late fact
// is applied, anything else ignored.
func (g *Guard) stale(ctx context.Context, uow *UnitOfWork, env event.Envelope) (Outcome, error) {
	if !g.late.applies(env.EventType) {
		return IgnoredStale, nil
	}
	if err := g.late.Apply(ctx, uow, env); err != nil {
		return "", err
	}
	return AppliedLateFact, nil
}

type aggregateRow struct {
	Version int64  `db:"version"`
	State   string `db:"state"`
}

// Handle applies, ignores or parks env in uow. The aggregate's row is
// locked for the rest of the transaction, so two events of one aggregate are
// never decided concurrently even across consumer instances.
func (g *Guard) Handle(ctx context.Context, uow *UnitOfWork, env event.Envelope) (Outcome, error) {
	outcomes, err := g.HandleBatch(ctx, uow, []event.Envelope{env})
	if err != nil {
		return "", err
	}
	return outcomes[0], nil
}

// HandleBatch decides and applies envs in order in uow, with a constant
// number of statements besides the side effects: one to lock (in aggregate
// order, so concurrent batches cannot deadlock on them) and read every
// aggregate's row, one to look for parked events, one to write the new
// versions back. The side effects of the events of distinct aggregates go
// to apply in one call, so a set-based apply keeps the whole batch at a
// constant number of statements.
func (g *Guard) HandleBatch(ctx context.Context, uow *UnitOfWork, envs []event.Envelope) ([]Outcome, error) {
	tx := uow.Tx()
	ids := make([]string, 0, len(envs))
	for _, env := range envs {
		ids = append(ids, env.AggregateID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)

	var rows []struct {
		AggregateID string `db:"aggregate_id"`
		aggregateRow
	}
	if err := tx.SelectContext(ctx, &rows, `
		INSERT INTO aggregate_versions (consumer, aggregate_id, version, state)
		SELECT $1, a, 0, $3 FROM unnest($2::text[]) AS a ORDER BY a
		ON CONFLICT (consumer, aggregate_id) DO UPDATE SET version = aggregate_versions.version
		RETURNING aggregate_id, version, state`, g.consumer, pq.Array(ids), InitialState); err != nil {
		return nil, fmt.Errorf("lock aggregate versions: %w", err)
	}
	cur := make(map[string]aggregateRow, len(rows))
	for _, r := range rows {
		cur[r.AggregateID] = r.aggregateRow
	}
	var withParked []string
	if err := tx.SelectContext(ctx, &withParked, `
		SELECT DISTINCT aggregate_id FROM parked_events WHERE consumer = $1 AND aggregate_id = ANY($2)`,
		g.consumer, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("look for parked events: %w", err)
	}
	parked := make(map[string]bool, len(withParked))
	for _, id := range withParked {
		parked[id] = true
	}

	// An aggregate seen once in the batch and without parked events is
	// applied with the others like it in one call of apply; the rest (several
	// events of one aggregate, or parked events to drain after it) one by
	// one, in order.
	seen := make(map[string]int, len(ids))
	for _, env := range envs {
		seen[env.AggregateID]++
	}
	outcomes := make([]Outcome, len(envs))
	changed := map[string]bool{}
	var (
		together []Pending
		at       []int
	)
	for i, env := range envs {
		row := cur[env.AggregateID]
		switch g.transitions.Decide(Position(row), env) {
		case IgnoredStale:
			out, err := g.stale(ctx, uow, env)
			if err != nil {
				return nil, err
			}
			outcomes[i] = out
			continue
		case WaitingForGap:
			if err := g.park(ctx, tx, env); err != nil {
				return nil, err
			}
			parked[env.AggregateID] = true
			outcomes[i] = WaitingForGap
			continue
		}
		if seen[env.AggregateID] == 1 && !parked[env.AggregateID] {
			together = append(together, Pending{Env: env, State: row.State})
			at = append(at, i)
			continue
		}
		next, err := g.applyOne(ctx, uow, env, row.State)
		if err != nil {
			return nil, err
		}
		row = aggregateRow{Version: env.AggregateVersion, State: next}
		if parked[env.AggregateID] {
			if row, err = g.drainParked(ctx, uow, env.AggregateID, row); err != nil {
				return nil, err
			}
		}
		cur[env.AggregateID] = row
		changed[env.AggregateID] = true
		outcomes[i] = Applied
	}
	if len(together) > 0 {
		states, err := g.apply(ctx, uow, together)
		if err != nil {
			return nil, err
		}
		if len(states) != len(together) {
			return nil, fmt.Errorf("apply returned %d states for %d events", len(states), len(together))
		}
		for j, p := range together {
			cur[p.Env.AggregateID] = aggregateRow{Version: p.Env.AggregateVersion, State: states[j]}
			changed[p.Env.AggregateID] = true
			outcomes[at[j]] = Applied
		}
	}
	if len(changed) == 0 {
		return outcomes, nil
	}
	var (
		aggs     []string
		versions []int64
		states   []string
	)
	for id := range changed {
		aggs = append(aggs, id)
		versions = append(versions, cur[id].Version)
		states = append(states, cur[id].State)
	}
	// Every row exists (the first statement locked it). An upsert finds
	// each through the primary key whatever the table's statistics say;
	// an UPDATE joined to the arrays was planned as a hash join over the
	// whole table while a backlog grew it faster than ANALYZE ran, and
	// took tens of milliseconds with the batch's hot rows locked.
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO aggregate_versions (consumer, aggregate_id, version, state)
		SELECT $1, * FROM unnest($2::text[], $3::bigint[], $4::text[])
		ON CONFLICT (consumer, aggregate_id) DO UPDATE
		SET version = EXCLUDED.version, state = EXCLUDED.state, updated_at = now()`,
		g.consumer, pq.Array(aggs), pq.Array(versions), pq.Array(states)); err != nil {
		return nil, fmt.Errorf("record aggregate versions: %w", err)
	}
	return outcomes, nil
}

func (g *Guard) applyOne(ctx context.Context, uow *UnitOfWork, env event.Envelope, state string) (string, error) {
	states, err := g.apply(ctx, uow, []Pending{{Env: env, State: state}})
	if err != nil {
		return "", err
	}
	if len(states) != 1 {
		return "", fmt.Errorf("apply returned %d states for one event", len(states))
	}
	return states[0], nil
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
func (g *Guard) drainParked(ctx context.Context, uow *UnitOfWork, aggregateID string, cur aggregateRow) (aggregateRow, error) {
	tx := uow.Tx()
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
		switch g.transitions.Decide(Position(cur), env) {
		case IgnoredStale:
			if _, err := g.stale(ctx, uow, env); err != nil {
				return cur, err
			}
		case Applied:
			next, err := g.applyOne(ctx, uow, env, cur.State)
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

// Position is where a consumer stands with one aggregate: the last
// aggregateVersion it applied and its own state, as a reconciliation view
// shows it.
type Position struct {
	Version int64  `db:"version" json:"version"`
	State   string `db:"state" json:"state"`
}

// States returns the consumer's position for each of aggregateIDs with one
// statement; an aggregate it has never seen is version 0, state NONE.
func States(ctx context.Context, q sqlx.QueryerContext, consumer string, aggregateIDs []string) (map[string]Position, error) {
	var rows []struct {
		AggregateID string `db:"aggregate_id"`
		Position
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT aggregate_id, version, state FROM aggregate_versions
		WHERE consumer = $1 AND aggregate_id = ANY($2)`, consumer, pq.Array(aggregateIDs)); err != nil {
		return nil, fmt.Errorf("read aggregate states of %d aggregates: %w", len(aggregateIDs), err)
	}
	out := make(map[string]Position, len(aggregateIDs))
	for _, id := range aggregateIDs {
		out[id] = Position{State: InitialState}
	}
	for _, r := range rows {
		out[r.AggregateID] = r.Position
	}
	return out, nil
}

// ParkedCount counts the consumer's parked events.
func ParkedCount(ctx context.Context, q sqlx.QueryerContext, consumer string) (int, error) {
	var n int
	if err := sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM parked_events WHERE consumer = $1`, consumer); err != nil {
		return 0, fmt.Errorf("count parked events: %w", err)
	}
	return n, nil
}
