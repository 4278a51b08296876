package dlq

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// Replay outcomes, as audited in dlq_replays.
const (
	OutcomeReplayed        = "REPLAYED"
	OutcomeAlreadyReplayed = "ALREADY_REPLAYED"
	OutcomeFailed          = "FAILED"
)

// ErrNotFound is returned for a dead letter id the store does not hold.
var ErrNotFound = errors.New("dead letter not found")

// Publish sends one message to a topic with the given key and headers.
type Publish func(ctx context.Context, topic string, key, value []byte, headers map[string]string) error

// ReplayResult is what a replay did.
type ReplayResult struct {
	ID            int64  `json:"id"`
	EventID       string `json:"eventId"`
	OriginalTopic string `json:"originalTopic"`
	Outcome       string `json:"outcome"`
}

// Replay sends dead letter id back to its original topic with its original
// key, value and headers — so with its original eventId, which the
// consumers' dedup rows recognise — marks it REPLAYED and audits who asked
// and what happened. Replaying a record again publishes nothing and is
// audited as ALREADY_REPLAYED. Run it after the cause is fixed.
func (s *Store) Replay(ctx context.Context, id int64, requestedBy string, publish Publish) (ReplayResult, error) {
	var res ReplayResult
	var publishErr error
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		var row recordRow
		err := tx.GetContext(ctx, &row, `
			SELECT id, consumer, event_id, aggregate_id, event_type, original_topic, original_partition, original_offset,
				message_key, message_value, headers, failure_reason, error_class, attempts, first_failed_at,
				dead_lettered_at, status
			FROM dead_letters WHERE id = $1 FOR UPDATE`, id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: %d", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("load dead letter %d: %w", id, err)
		}
		res = ReplayResult{ID: id, EventID: row.EventID, OriginalTopic: row.OriginalTopic, Outcome: OutcomeReplayed}
		if row.Status == OutcomeReplayed {
			res.Outcome = OutcomeAlreadyReplayed
		} else {
			var headers map[string]string
			if err := json.Unmarshal(row.HeadersJSON, &headers); err != nil {
				return fmt.Errorf("decode dead letter headers: %w", err)
			}
			if err := publish(ctx, row.OriginalTopic, row.Key, row.Value, headers); err != nil {
				publishErr = err
				return fmt.Errorf("replay dead letter %d: %w", id, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE dead_letters SET status = 'REPLAYED' WHERE id = $1`, id); err != nil {
				return fmt.Errorf("mark dead letter replayed: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO dlq_replays (dead_letter_id, requested_by, outcome) VALUES ($1, $2, $3)`,
			id, requestedBy, res.Outcome); err != nil {
			return fmt.Errorf("audit replay: %w", err)
		}
		return nil
	})
	if publishErr != nil {
		// The transaction rolled back; the failed attempt is audited on its own.
		if _, auditErr := s.db.ExecContext(ctx, `INSERT INTO dlq_replays (dead_letter_id, requested_by, outcome, detail) VALUES ($1, $2, $3, $4)`,
			id, requestedBy, OutcomeFailed, publishErr.Error()); auditErr != nil {
			return res, errors.Join(err, fmt.Errorf("audit failed replay: %w", auditErr))
		}
	}
	return res, err
}

// ReplayAudit is one audited replay.
type ReplayAudit struct {
	DeadLetterID int64  `db:"dead_letter_id" json:"deadLetterId"`
	RequestedBy  string `db:"requested_by" json:"requestedBy"`
	RequestedAt  string `db:"requested_at" json:"requestedAt"`
	Outcome      string `db:"outcome" json:"outcome"`
}

// Replays lists the audit of dead letter id, oldest first.
func (s *Store) Replays(ctx context.Context, id int64) ([]ReplayAudit, error) {
	var out []ReplayAudit
	if err := s.db.SelectContext(ctx, &out, `
		SELECT dead_letter_id, requested_by, to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS requested_at, outcome
		FROM dlq_replays WHERE dead_letter_id = $1 ORDER BY id`, id); err != nil {
		return nil, fmt.Errorf("list replays: %w", err)
	}
	return out, nil
}
