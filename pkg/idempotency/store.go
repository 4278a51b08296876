package idempotency

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates idempotency_keys.
func Schema() postgres.MigrationSet { return postgres.EmbeddedSet("idempotency", migrations) }

// Verdict is what Claim decided about a request with a key.
type Verdict int

// The verdicts of Claim.
const (
	// Run: the request is the key's first (or the key's earlier run was
	// abandoned past its lock); run it and Complete or Release the claim.
	Run Verdict = iota
	// Replay: the key's request ran to an answer; send that answer again.
	Replay
	// InUse: the key's request is still running.
	InUse
	// Reused: the key was sent with another request.
	Reused
)

// Request is one keyed request as the store sees it.
type Request struct {
	// Scope is what the key is unique within: the method and the route.
	Scope string
	// Key is the client's Idempotency-Key.
	Key string
	// Fingerprint identifies the request's content (Fingerprint).
	Fingerprint string
}

// Answer is a stored answer.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
}

// Claim is Claim's result.
type Claim struct {
	Verdict Verdict
	// Owner identifies this run of the key's request (Run); Complete and
	// Release act only for the run that holds the key.
	Owner uuid.UUID
	// TakenOver is set on Run when an earlier run held the key past its
	// lock timeout: that run may have changed state before it died.
	TakenOver bool
	// Answer is the stored answer (Replay).
	Answer Answer
}

// Store keeps the keys in the service's database.
type Store struct {
	db  *sqlx.DB
	cfg Config
}

// NewStore returns the store of db's idempotency_keys with cfg's window
// and lock timeout; zero fields take Config's defaults.
func NewStore(db *sqlx.DB, cfg Config) *Store {
	return &Store{db: db, cfg: cfg.withDefaults()}
}

// Claim records r's key as running, or tells why it cannot run: its answer
// is stored, it is running, or it stands for another request. A key older
// than the window counts as absent: it is the sweeper's to delete, and a
// client may use it afresh.
func (s *Store) Claim(ctx context.Context, r Request) (Claim, error) {
	now := s.cfg.Now()
	owner := uuid.New()
	var claim Claim
	err := postgres.InTx(ctx, s.db, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, owner, state, created_at, locked_until)
			VALUES ($1, $2, $3, $4, 'RUNNING', $5, $6)
			ON CONFLICT (scope, idempotency_key) DO NOTHING`,
			r.Scope, r.Key, r.Fingerprint, owner, now, now.Add(s.cfg.LockTimeout))
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		} else if n == 1 {
			claim = Claim{Verdict: Run, Owner: owner}
			return nil
		}
		var row struct {
			Fingerprint string         `db:"fingerprint"`
			State       string         `db:"state"`
			Status      sql.NullInt64  `db:"status"`
			ContentType sql.NullString `db:"content_type"`
			Body        []byte         `db:"body"`
			CreatedAt   time.Time      `db:"created_at"`
			LockedUntil time.Time      `db:"locked_until"`
		}
		// The row exists: the insert waited for its writer to commit.
		if err := tx.GetContext(ctx, &row, `
			SELECT fingerprint, state, status, content_type, body, created_at, locked_until
			FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 FOR UPDATE`, r.Scope, r.Key); err != nil {
			return fmt.Errorf("read idempotency key: %w", err)
		}
		expired := !row.CreatedAt.After(now.Add(-s.cfg.TTL))
		switch {
		case expired:
			claim = Claim{Verdict: Run, Owner: owner}
			_, err = tx.ExecContext(ctx, `
				UPDATE idempotency_keys SET fingerprint = $3, owner = $4, state = 'RUNNING', status = NULL,
					content_type = NULL, body = NULL, created_at = $5, locked_until = $6
				WHERE scope = $1 AND idempotency_key = $2`,
				r.Scope, r.Key, r.Fingerprint, owner, now, now.Add(s.cfg.LockTimeout))
		case row.Fingerprint != r.Fingerprint:
			claim = Claim{Verdict: Reused}
		case row.State == stateDone:
			claim = Claim{Verdict: Replay, Answer: Answer{Status: int(row.Status.Int64), ContentType: row.ContentType.String, Body: row.Body}}
		case row.LockedUntil.After(now):
			claim = Claim{Verdict: InUse}
		default:
			claim = Claim{Verdict: Run, Owner: owner, TakenOver: true}
			_, err = tx.ExecContext(ctx, `
				UPDATE idempotency_keys SET owner = $3, locked_until = $4 WHERE scope = $1 AND idempotency_key = $2`,
				r.Scope, r.Key, owner, now.Add(s.cfg.LockTimeout))
		}
		if err != nil {
			return fmt.Errorf("claim idempotency key: %w", err)
		}
		return nil
	})
	if err != nil {
		return Claim{}, err
	}
	return claim, nil
}

// stateDone is the state of a key whose answer is stored.
const stateDone = "DONE"

// ErrNotHeld is returned by Complete when the run no longer holds the key:
// another run took it over past the lock timeout, or it was swept.
var ErrNotHeld = errors.New("idempotency key is no longer held by this run")

// Complete stores a's answer for r's key, held by owner: from now on every
// request with the key and the same content gets it.
func (s *Store) Complete(ctx context.Context, r Request, owner uuid.UUID, a Answer) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE idempotency_keys SET state = 'DONE', status = $4, content_type = $5, body = $6
		WHERE scope = $1 AND idempotency_key = $2 AND owner = $3 AND state = 'RUNNING'`,
		r.Scope, r.Key, owner, a.Status, a.ContentType, a.Body)
	if err != nil {
		return fmt.Errorf("store idempotent answer: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store idempotent answer: %w", err)
	} else if n == 0 {
		return ErrNotHeld
	}
	return nil
}

// Release forgets r's key, held by owner, so that a retry with it runs the
// request again: its answer said nothing ran, or may not be kept.
func (s *Store) Release(ctx context.Context, r Request, owner uuid.UUID) error {
	if _, err := s.db.ExecContext(ctx, `
		DELETE FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND owner = $3 AND state = 'RUNNING'`,
		r.Scope, r.Key, owner); err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// sweepBatch bounds the rows one statement of Sweep deletes, so a sweep
// after a busy day holds no long lock and no long transaction.
const sweepBatch = 1000

// Sweep deletes the keys older than the window and returns how many.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	cutoff := s.cfg.Now().Add(-s.cfg.TTL)
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, `
			DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
				SELECT ctid FROM idempotency_keys WHERE created_at <= $1 LIMIT $2))`, cutoff, sweepBatch)
		if err != nil {
			return total, fmt.Errorf("sweep idempotency keys: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("sweep idempotency keys: %w", err)
		}
		total += n
		if n < sweepBatch {
			return total, nil
		}
	}
}

// RunSweeper sweeps every cfg.SweepInterval until ctx ends; a failed sweep
// is reported to onError and tried again at the next tick.
func (s *Store) RunSweeper(ctx context.Context, onError func(error)) error {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil && onError != nil {
			onError(err)
		}
	}
}
