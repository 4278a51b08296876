// Package dlq keeps the audit side of the dead-letter queue: every message a
// consumer dead-letters is recorded in its own database (besides being
// published to the DLQ topic), so operators can list, inspect and replay it.
package dlq

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates dead_letters and dlq_replays.
func Schema() postgres.MigrationSet { return postgres.EmbeddedSet("dlq", migrations) }

// Record is one dead-lettered message with the metadata of docs/design.md,
// Dead letters.
type Record struct {
	ID                int64             `db:"id" json:"id"`
	Consumer          string            `db:"consumer" json:"consumer"`
	EventID           string            `db:"event_id" json:"eventId"`
	AggregateID       string            `db:"aggregate_id" json:"aggregateId"`
	EventType         string            `db:"event_type" json:"eventType"`
	OriginalTopic     string            `db:"original_topic" json:"originalTopic"`
	OriginalPartition int32             `db:"original_partition" json:"originalPartition"`
	OriginalOffset    int64             `db:"original_offset" json:"originalOffset"`
	Key               []byte            `db:"message_key" json:"key"`
	Value             []byte            `db:"message_value" json:"value"`
	Headers           map[string]string `db:"-" json:"headers"`
	FailureReason     string            `db:"failure_reason" json:"failureReason"`
	ErrorClass        string            `db:"error_class" json:"errorClass"`
	Attempts          int               `db:"attempts" json:"attempts"`
	FirstFailedAt     time.Time         `db:"first_failed_at" json:"firstFailedAt"`
	DeadLetteredAt    time.Time         `db:"dead_lettered_at" json:"deadLetteredAt"`
	Status            string            `db:"status" json:"status"`
}

// Store reads and writes one consumer database's dead letters.
type Store struct {
	db       *sqlx.DB
	outcomes Outcomes
	wait     time.Duration
}

// NewStore returns a store over db.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

// Add records r and returns its id.
func (s *Store) Add(ctx context.Context, r Record) (int64, error) { return Insert(ctx, s.db, r) }

// Insert records r through q and returns its id. Given a transaction, the
// record commits or rolls back with the caller's other work: the gap
// sweeper takes a parked event out and records its dead letter at once.
// A consumer's event has one DEAD row: when it is dead-lettered again
// before a replay (its DLQ publish failed, so it was delivered and failed
// again), its attempts are added to that row, which takes the latest
// failure, and its id is returned. A message without an event id gets a
// row each time.
func Insert(ctx context.Context, q sqlx.QueryerContext, r Record) (int64, error) {
	headers, err := json.Marshal(r.Headers)
	if err != nil {
		return 0, fmt.Errorf("encode dead letter headers: %w", err)
	}
	var id int64
	err = sqlx.GetContext(ctx, q, &id, `
		INSERT INTO dead_letters (consumer, event_id, aggregate_id, event_type, original_topic, original_partition,
			original_offset, message_key, message_value, headers, failure_reason, error_class, attempts, first_failed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
		ON CONFLICT (consumer, event_id) WHERE status = 'DEAD' AND event_id <> '' DO UPDATE SET
			original_partition = EXCLUDED.original_partition, original_offset = EXCLUDED.original_offset,
			failure_reason = EXCLUDED.failure_reason, error_class = EXCLUDED.error_class,
			attempts = dead_letters.attempts + EXCLUDED.attempts,
			first_failed_at = LEAST(dead_letters.first_failed_at, EXCLUDED.first_failed_at),
			dead_lettered_at = now()
		RETURNING id`,
		r.Consumer, r.EventID, r.AggregateID, r.EventType, r.OriginalTopic, r.OriginalPartition, r.OriginalOffset,
		r.Key, r.Value, headers, r.FailureReason, r.ErrorClass, r.Attempts, r.FirstFailedAt)
	if err != nil {
		return 0, fmt.Errorf("record dead letter: %w", err)
	}
	return id, nil
}

type recordRow struct {
	Record
	HeadersJSON []byte `db:"headers"`
}

// Filter selects dead letters; empty fields match everything.
type Filter struct {
	AggregateID string
	// Status is DEAD (waiting for a fix and a replay) or REPLAYED.
	Status string
}

// List returns the dead letters of aggregateID, or all when it is empty,
// newest first (at most 500).
func (s *Store) List(ctx context.Context, aggregateID string) ([]Record, error) {
	return s.Find(ctx, Filter{AggregateID: aggregateID})
}

// Find returns the dead letters f selects, newest first (at most 500).
func (s *Store) Find(ctx context.Context, f Filter) ([]Record, error) {
	var rows []recordRow
	if err := s.db.SelectContext(ctx, &rows, `
		SELECT id, consumer, event_id, aggregate_id, event_type, original_topic, original_partition, original_offset,
			message_key, message_value, headers, failure_reason, error_class, attempts, first_failed_at,
			dead_lettered_at, status
		FROM dead_letters
		WHERE ($1 = '' OR aggregate_id = $1) AND ($2 = '' OR status = $2)
		ORDER BY id DESC LIMIT 500`, f.AggregateID, f.Status); err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	out := make([]Record, len(rows))
	for i, row := range rows {
		out[i] = row.Record
		if err := json.Unmarshal(row.HeadersJSON, &out[i].Headers); err != nil {
			return nil, fmt.Errorf("decode dead letter headers: %w", err)
		}
	}
	return out, nil
}

// Get returns dead letter id.
func (s *Store) Get(ctx context.Context, id int64) (Record, error) {
	var row recordRow
	err := s.db.GetContext(ctx, &row, `
		SELECT id, consumer, event_id, aggregate_id, event_type, original_topic, original_partition, original_offset,
			message_key, message_value, headers, failure_reason, error_class, attempts, first_failed_at,
			dead_lettered_at, status
		FROM dead_letters WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("%w: %d", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, fmt.Errorf("get dead letter: %w", err)
	}
	rec := row.Record
	if err := json.Unmarshal(row.HeadersJSON, &rec.Headers); err != nil {
		return Record{}, fmt.Errorf("decode dead letter headers: %w", err)
	}
	return rec, nil
}

// Count counts the dead letters of aggregateID.
func (s *Store) Count(ctx context.Context, aggregateID string) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM dead_letters WHERE aggregate_id = $1`, aggregateID); err != nil {
		return 0, fmt.Errorf("count dead letters: %w", err)
	}
	return n, nil
}

// Outstanding is a dead letter still waiting for a fix and a replay (status
// DEAD), as a reconciliation view shows it.
type Outstanding struct {
	AggregateID    string    `db:"aggregate_id" json:"-"`
	ID             int64     `db:"id" json:"id"`
	EventID        string    `db:"event_id" json:"eventId"`
	EventType      string    `db:"event_type" json:"eventType"`
	ErrorClass     string    `db:"error_class" json:"errorClass"`
	FailureReason  string    `db:"failure_reason" json:"failureReason"`
	DeadLetteredAt time.Time `db:"dead_lettered_at" json:"deadLetteredAt"`
	// ReplayedBefore: the same event was dead-lettered by this consumer,
	// replayed, and failed again. Replaying once more is unlikely to help
	// before its cause is fixed.
	ReplayedBefore bool `db:"replayed_before" json:"replayedBefore"`
}

// Outstanding returns, with one statement, the dead letters of consumer
// that are still DEAD for each of aggregateIDs, each aggregate's oldest
// first, times in UTC. An aggregate without any has none in the map.
func (s *Store) Outstanding(ctx context.Context, consumer string, aggregateIDs []string) (map[string][]Outstanding, error) {
	return FindOutstanding(ctx, s.db, consumer, aggregateIDs)
}

// FindOutstanding is Store.Outstanding through q: given a transaction, it
// reads the same snapshot as the caller's other reads, so a
// reconciliation view never pairs a dead letter with a state from another
// moment.
func FindOutstanding(ctx context.Context, q sqlx.QueryerContext, consumer string, aggregateIDs []string) (map[string][]Outstanding, error) {
	var rows []Outstanding
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT d.aggregate_id, d.id, d.event_id, d.event_type, d.error_class, d.failure_reason, d.dead_lettered_at,
			EXISTS (SELECT 1 FROM dead_letters r
			        WHERE r.consumer = d.consumer AND r.event_id = d.event_id AND r.status = 'REPLAYED') AS replayed_before
		FROM dead_letters d
		WHERE d.consumer = $1 AND d.aggregate_id = ANY($2) AND d.status = 'DEAD'
		ORDER BY d.dead_lettered_at, d.id`, consumer, pq.Array(aggregateIDs)); err != nil {
		return nil, fmt.Errorf("outstanding dead letters of %d aggregates: %w", len(aggregateIDs), err)
	}
	out := make(map[string][]Outstanding, len(aggregateIDs))
	for _, r := range rows {
		r.DeadLetteredAt = r.DeadLetteredAt.UTC()
		out[r.AggregateID] = append(out[r.AggregateID], r)
	}
	return out, nil
}
