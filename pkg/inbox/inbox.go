// Package inbox makes a consumer idempotent: the dedup row of an event is
// inserted in the same transaction as its side effect, so however often the
// broker delivers an event, its effect is committed once.
package inbox

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates processed_events.
func Schema() postgres.MigrationSet { return postgres.EmbeddedSet("inbox", migrations) }

// Duplicate is the outcome of an event whose dedup row already existed.
const Duplicate versionguard.Outcome = "DUPLICATE"

// NotHandled is the outcome of an event type the consumer has no
// transition for: acknowledged without any write.
const NotHandled versionguard.Outcome = "NOT_HANDLED"

// Count returns how many dedup rows consumer has for eventID: 0 or 1.
func Count(ctx context.Context, q sqlx.QueryerContext, consumer, eventID string) (int, error) {
	r, err := Lookup(ctx, q, consumer, eventID)
	return r.Count, err
}

// Record is what a consumer's dedup table holds about one event.
type Record struct {
	// Count is the number of dedup rows: 0 or 1.
	Count int `db:"count"`
	// Duplicates counts the copies delivered after the first that were
	// recognised as duplicates (DUPLICATE outcomes) and committed.
	Duplicates int `db:"duplicates"`
}

// Lookup returns consumer's dedup record of eventID; an event never
// recorded has Count 0.
func Lookup(ctx context.Context, q sqlx.QueryerContext, consumer, eventID string) (Record, error) {
	var r Record
	if err := sqlx.GetContext(ctx, q, &r, `
		SELECT count(*) AS count, coalesce(sum(duplicates), 0) AS duplicates
		FROM processed_events WHERE consumer = $1 AND event_id = $2`, consumer, eventID); err != nil {
		return Record{}, fmt.Errorf("look up processed event: %w", err)
	}
	return r, nil
}

// Outcomes reads the outcomes consumers recorded for events: a dead
// letter's replay answers with them.
type Outcomes struct {
	db *sqlx.DB
}

// NewOutcomes returns the outcomes recorded in db.
func NewOutcomes(db *sqlx.DB) Outcomes { return Outcomes{db: db} }

// Outcome returns what consumer recorded for eventID (APPLIED,
// IGNORED_STALE_EVENT, WAITING_FOR_GAP, ...) and whether it has a dedup
// row for it at all.
func (o Outcomes) Outcome(ctx context.Context, consumer, eventID string) (string, bool, error) {
	var outcome string
	err := o.db.GetContext(ctx, &outcome,
		`SELECT outcome FROM processed_events WHERE consumer = $1 AND event_id = $2`, consumer, eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("outcome of %s: %w", eventID, err)
	}
	return outcome, true, nil
}

// Processor applies events to one consumer exactly once in effect:
// dedup row, version guard and side effect in one transaction.
type Processor struct {
	db       *sqlx.DB
	consumer string
	guard    *versionguard.Guard
}

// NewProcessor returns a processor for consumer over db.
func NewProcessor(db *sqlx.DB, consumer string, guard *versionguard.Guard) *Processor {
	return &Processor{db: db, consumer: consumer, guard: guard}
}

// Consumer is the name dedup rows are keyed by.
func (p *Processor) Consumer() string { return p.consumer }

// Process applies env once. It returns only after the transaction
// committed, so the caller may acknowledge the message when err is nil.
func (p *Processor) Process(ctx context.Context, env event.Envelope) (versionguard.Outcome, error) {
	if !p.guard.Transitions().Handles(env.EventType) {
		return NotHandled, nil
	}
	outcomes, err := p.inTx(ctx, []event.Envelope{env})
	if err != nil {
		return "", err
	}
	return outcomes[0], nil
}

// applyBatch claims envs, runs the claimed ones through the version guard
// and records the outcomes that are not APPLIED, in uow, with a constant
// number of statements besides the side effects.
func (p *Processor) applyBatch(ctx context.Context, uow *versionguard.UnitOfWork, envs []event.Envelope) ([]versionguard.Outcome, error) {
	tx := uow.Tx()
	fresh, err := p.claim(ctx, tx, envs)
	if err != nil {
		return nil, err
	}
	outcomes := make([]versionguard.Outcome, len(envs))
	var claimed []event.Envelope
	var at []int
	for i, env := range envs {
		if !fresh[env.EventID] {
			outcomes[i] = Duplicate
			continue
		}
		if deduplicating {
			delete(fresh, env.EventID) // a second copy in the same batch is a duplicate
		}
		claimed = append(claimed, env)
		at = append(at, i)
	}
	if len(claimed) == 0 {
		return outcomes, nil
	}
	decided, err := p.guard.HandleBatch(ctx, uow, claimed)
	if err != nil {
		return nil, err
	}
	var otherIDs, others []string
	recorded := map[string]bool{}
	for j, outcome := range decided {
		outcomes[at[j]] = outcome
		if id := claimed[j].EventID; outcome != versionguard.Applied && !recorded[id] {
			recorded[id] = true
			otherIDs = append(otherIDs, id)
			others = append(others, string(outcome))
		}
	}
	if len(otherIDs) > 0 {
		// The rows exist (claimed above); an upsert finds each through the
		// primary key whatever the table's statistics say (see
		// versionguard's write of the versions).
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO processed_events (consumer, event_id, outcome)
			SELECT $1, * FROM unnest($2::text[], $3::text[])
			ON CONFLICT (consumer, event_id) DO UPDATE SET outcome = EXCLUDED.outcome`,
			p.consumer, pq.Array(otherIDs), pq.Array(others)); err != nil {
			return nil, fmt.Errorf("record outcomes: %w", err)
		}
	}
	return outcomes, nil
}

// claim inserts the dedup rows of envs and returns the ids of the events
// delivered for the first time. A row that exists already counts the
// copies as duplicates; so do the further copies of an event within envs.
// The rows are written in id order, so that two batches sharing events
// lock them in the same order.
func (p *Processor) claim(ctx context.Context, tx *sqlx.Tx, envs []event.Envelope) (map[string]bool, error) {
	copies := map[string]int{}
	for _, env := range envs {
		copies[env.EventID]++
	}
	ids := make([]string, 0, len(copies))
	for id := range copies {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ns := make([]int64, len(ids))
	for i, id := range ids {
		ns[i] = int64(copies[id])
	}
	var rows []struct {
		EventID    string `db:"event_id"`
		Duplicates int64  `db:"duplicates"`
	}
	if err := tx.SelectContext(ctx, &rows, claimSQL, p.consumer, pq.Array(ids), pq.Array(ns)); err != nil {
		return nil, fmt.Errorf("claim events: %w", err)
	}
	fresh := make(map[string]bool, len(ids))
	if !deduplicating {
		for _, id := range ids {
			fresh[id] = true
		}
		return fresh, nil
	}
	for _, r := range rows {
		fresh[r.EventID] = r.Duplicates == int64(copies[r.EventID]-1)
	}
	return fresh, nil
}

// TakeExpired takes the consumer's parked events older than olderThan out
// of the way (see versionguard.Guard.TakeExpired) and deletes their dedup
// rows in the same transaction: a dead-lettered event must not count as
// processed, or its replay after the fix would be ignored as a duplicate.
func (p *Processor) TakeExpired(ctx context.Context, tx *sqlx.Tx, olderThan time.Duration, limit int) ([]versionguard.Expired, error) {
	expired, err := p.guard.TakeExpired(ctx, tx, olderThan, limit)
	if err != nil || len(expired) == 0 {
		return expired, err
	}
	ids := make([]string, len(expired))
	for i, e := range expired {
		ids[i] = e.Event.EventID
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`,
		p.consumer, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("forget expired events: %w", err)
	}
	return expired, nil
}

// CountParked counts the consumer's parked events.
func (p *Processor) CountParked(ctx context.Context, q sqlx.QueryerContext) (int, error) {
	return p.guard.CountParked(ctx, q)
}
