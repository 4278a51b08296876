package dlq

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// Statuses of a dead letter.
const (
	StatusDead     = "DEAD"
	StatusReplayed = "REPLAYED"
)

// Replay outcomes, as answered and audited in dlq_replays: what the
// dead letter's consumer did with the event sent back (docs/decisions.md,
// Replay outcomes).
const (
	// OutcomeApplied: the consumer applied the event.
	OutcomeApplied = "APPLIED"
	// OutcomeIgnoredStale: the consumer's version guard ignored the event
	// as older than what it holds; nothing changed.
	OutcomeIgnoredStale = "IGNORED_STALE"
	// OutcomeDuplicate: the consumer had already processed the event; its
	// inbox drops the copy and nothing changes.
	OutcomeDuplicate = "DUPLICATE"
	// OutcomeParked: the consumer parked the event until its predecessor
	// arrives.
	OutcomeParked = "PARKED"
	// OutcomeDeadLettered: the event failed again and has a new DEAD row.
	OutcomeDeadLettered = "DEAD_LETTERED"
	// OutcomePending: the event was sent back but the consumer had not
	// decided within the wait; GET /admin/dlq/{id} tells later.
	OutcomePending = "PENDING"
	// OutcomeAlreadyReplayed: the record was replayed before; nothing was
	// sent again.
	OutcomeAlreadyReplayed = "ALREADY_REPLAYED"
	// OutcomeFailed: the event could not be sent back; the record stays
	// DEAD.
	OutcomeFailed = "FAILED"
)

// DefaultReplayWait is how long a replay waits for the consumer's outcome
// before it answers PENDING.
const DefaultReplayWait = 10 * time.Second

// ErrNotFound is returned for a dead letter id the store does not hold.
var ErrNotFound = errors.New("dead letter not found")

// Publish sends one message to a topic with the given key and headers.
type Publish func(ctx context.Context, topic string, key, value []byte, headers map[string]string) error

// Outcomes reads what a consumer decided about an event: its inbox's
// outcome (APPLIED, IGNORED_STALE_EVENT, WAITING_FOR_GAP, ...), and
// whether it decided at all.
type Outcomes interface {
	Outcome(ctx context.Context, consumer, eventID string) (outcome string, decided bool, err error)
}

// ReplayResult is what a replay did.
type ReplayResult struct {
	ID            int64  `json:"id"`
	EventID       string `json:"eventId"`
	OriginalTopic string `json:"originalTopic"`
	Outcome       string `json:"outcome"`
}

// WithOutcomes returns the store answering each replay with what the
// consumer did with the event, read through outcomes for at most wait
// (DefaultReplayWait when 0). Without it a replay answers PENDING.
func (s *Store) WithOutcomes(outcomes Outcomes, wait time.Duration) *Store {
	if wait <= 0 {
		wait = DefaultReplayWait
	}
	return &Store{db: s.db, outcomes: outcomes, wait: wait}
}

// Replay sends dead letter id back to its original topic with its original
// key, value and headers — so with its original eventId, which the
// consumers' dedup rows recognise — marks it REPLAYED and audits who asked
// and what happened. It answers what the consumer did with the event:
// DUPLICATE at once when the consumer had processed it before, otherwise
// the consumer's outcome as soon as its inbox records it (APPLIED,
// IGNORED_STALE, PARKED) or the event is dead-lettered again
// (DEAD_LETTERED), and PENDING when neither happens within the wait; the
// audit row is updated with the answer. Replaying a record again publishes
// nothing and is audited as ALREADY_REPLAYED; a failed publish leaves the
// record DEAD and is audited as FAILED. Run it after the cause is fixed.
func (s *Store) Replay(ctx context.Context, id int64, requestedBy string, publish Publish) (ReplayResult, error) {
	var res ReplayResult
	var consumer string
	var audit int64
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
		consumer = row.Consumer
		res = ReplayResult{ID: id, EventID: row.EventID, OriginalTopic: row.OriginalTopic, Outcome: OutcomePending}
		if row.Status == StatusReplayed {
			res.Outcome = OutcomeAlreadyReplayed
		} else {
			if s.outcomes != nil && row.EventID != "" {
				if _, decided, err := s.outcomes.Outcome(ctx, row.Consumer, row.EventID); err != nil {
					return fmt.Errorf("outcome of %s before the replay: %w", row.EventID, err)
				} else if decided {
					res.Outcome = OutcomeDuplicate
				}
			}
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
		if err := tx.GetContext(ctx, &audit, `INSERT INTO dlq_replays (dead_letter_id, requested_by, outcome) VALUES ($1, $2, $3)
			RETURNING id`, id, requestedBy, res.Outcome); err != nil {
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
	if err != nil || res.Outcome != OutcomePending || s.outcomes == nil || res.EventID == "" {
		return res, err
	}
	// Committed first: the consumer dead-lettering the event again needs
	// the record's DEAD row gone from the unique key.
	outcome, err := s.awaitOutcome(ctx, id, consumer, res.EventID)
	if err != nil {
		return res, err
	}
	if outcome == OutcomePending {
		return res, nil
	}
	res.Outcome = outcome
	if _, err := s.db.ExecContext(ctx, `UPDATE dlq_replays SET outcome = $2 WHERE id = $1`, audit, outcome); err != nil {
		return res, fmt.Errorf("audit replay outcome: %w", err)
	}
	return res, nil
}

// awaitOutcome polls for the consumer's decision about eventID, sent back
// from dead letter id, until the wait ends.
func (s *Store) awaitOutcome(ctx context.Context, id int64, consumer, eventID string) (string, error) {
	deadline := time.NewTimer(s.wait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		outcome, decided, err := s.outcomes.Outcome(ctx, consumer, eventID)
		if err != nil {
			return "", fmt.Errorf("outcome of replayed %s: %w", eventID, err)
		}
		if decided {
			return replayOutcome(outcome), nil
		}
		var again bool
		if err := s.db.GetContext(ctx, &again, `
			SELECT EXISTS (SELECT 1 FROM dead_letters WHERE consumer = $1 AND event_id = $2 AND id > $3 AND status = 'DEAD')`,
			consumer, eventID, id); err != nil {
			return "", fmt.Errorf("look for %s dead-lettered again: %w", eventID, err)
		}
		if again {
			return OutcomeDeadLettered, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline.C:
			return OutcomePending, nil
		case <-tick.C:
		}
	}
}

// replayOutcome names a consumer's inbox outcome as a replay's.
func replayOutcome(inbox string) string {
	switch inbox {
	case "IGNORED_STALE_EVENT":
		return OutcomeIgnoredStale
	case "APPLIED_LATE_FACT":
		// A late fact (a refund's message) was applied; the state stood.
		return OutcomeApplied
	case "WAITING_FOR_GAP":
		return OutcomeParked
	}
	return inbox
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
