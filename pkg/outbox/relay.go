package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/backoff"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
)

// Sink delivers messages. Send delivers msgs in order and returns how many
// of them, from the start, are known to be delivered; the rest are retried.
// A sink must keep the order of one aggregate's messages.
type Sink interface {
	Send(ctx context.Context, msgs []Message) (int, error)
}

// Fail points of the relay's crash windows.
const (
	// FailPointBeforePublish fires when a batch of committed rows is about
	// to be sent: a crash here leaves them PENDING for the next relay.
	FailPointBeforePublish = "relay.before-publish"
	// FailPointAfterPublish fires after the sink accepted a batch and before
	// the rows are marked SENT: a crash here causes a re-send with the same
	// event ids.
	FailPointAfterPublish = "relay.after-publish"
)

// RelayConfig tunes the relay.
type RelayConfig struct {
	BatchSize      int
	PollInterval   time.Duration
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// LockKey is the Postgres advisory lock that makes one relay per
	// database active; replicas wait for it.
	LockKey int64
	// ListenURL, when set, is the outbox database's URL: the relay LISTENs
	// there for the notification every outbox insert sends on commit, and
	// relays at once instead of at its next poll. Empty: polling only.
	ListenURL string
}

// ReadRelayEnv reads OUTBOX_BATCH_SIZE, OUTBOX_POLL_INTERVAL,
// OUTBOX_BACKOFF_INITIAL and OUTBOX_BACKOFF_MAX through r, which collects
// the malformed values with the service's own: every service with an
// outbox reads its relay's settings here, under the same names and
// defaults. ListenURL is the caller's: it is the service's database.
func ReadRelayEnv(r *envconfig.Reader) RelayConfig {
	c := DefaultRelayConfig()
	c.BatchSize = r.Int("OUTBOX_BATCH_SIZE", c.BatchSize)
	c.PollInterval = r.Duration("OUTBOX_POLL_INTERVAL", c.PollInterval)
	c.BackoffInitial = r.Duration("OUTBOX_BACKOFF_INITIAL", c.BackoffInitial)
	c.BackoffMax = r.Duration("OUTBOX_BACKOFF_MAX", c.BackoffMax)
	return c
}

// notifyChannel is the channel the outbox's insert trigger notifies
// (migrations/00003_notify_relay.sql).
const notifyChannel = "outbox_events"

// DefaultRelayConfig returns the defaults documented in README.md (Configuration).
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		BatchSize:      2000,
		PollInterval:   100 * time.Millisecond,
		BackoffInitial: time.Second,
		BackoffMax:     30 * time.Second,
		LockKey:        0x6f7574626f78, // "outbox"
	}
}

// Validate reports an unusable configuration, naming the variable
// ReadRelayEnv reads each setting from.
func (c RelayConfig) Validate() error {
	var errs []error
	if c.BatchSize < 1 {
		errs = append(errs, fmt.Errorf("OUTBOX_BATCH_SIZE=%d: want at least 1", c.BatchSize))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, fmt.Errorf("OUTBOX_POLL_INTERVAL=%s: must be positive", c.PollInterval))
	}
	if c.BackoffInitial <= 0 || c.BackoffMax < c.BackoffInitial {
		errs = append(errs, fmt.Errorf("OUTBOX_BACKOFF_INITIAL=%s, OUTBOX_BACKOFF_MAX=%s: want 0 < initial <= max",
			c.BackoffInitial, c.BackoffMax))
	}
	return errors.Join(errs...)
}

// Relay moves committed rows from outbox_events to a sink.
type Relay struct {
	db         *sqlx.DB
	sink       Sink
	cfg        RelayConfig
	logger     *slog.Logger
	failPoints *failpoint.Registry
	metrics    *RelayMetrics
}

// NewRelay returns a relay; metrics and failPoints may be nil. failPoints
// lets crash tests stop the relay inside its windows.
func NewRelay(db *sqlx.DB, sink Sink, cfg RelayConfig, logger *slog.Logger, metrics *RelayMetrics, failPoints *failpoint.Registry) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Relay{db: db, sink: sink, cfg: cfg, logger: logger, metrics: metrics, failPoints: failPoints}, nil
}

// Run relays until ctx ends. Only the holder of the advisory lock relays;
// the others retry the lock every poll interval.
func (r *Relay) Run(ctx context.Context) error {
	var wake <-chan *pq.Notification
	if r.cfg.ListenURL != "" {
		l := pq.NewListener(r.cfg.ListenURL, 100*time.Millisecond, 10*time.Second, func(ev pq.ListenerEventType, err error) {
			if err != nil && ctx.Err() == nil {
				r.logger.WarnContext(ctx, "outbox listener", "event", ev, "error", err)
			}
		})
		defer l.Close()
		if err := l.Listen(notifyChannel); err != nil {
			// The listener keeps reconnecting in the background; until it
			// is back, polling relays everything.
			r.logger.WarnContext(ctx, "outbox listener: polling only until it reconnects", "error", err)
		}
		wake = l.Notify
	}
	for {
		if err := r.lead(ctx, wake); err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "outbox relay interrupted", "error", err)
		}
		if !wait(ctx, r.cfg.PollInterval, wake, false) {
			return nil
		}
	}
}

// lead takes the advisory lock on a dedicated connection and relays while
// holding it. The lock dies with the connection, so a crashed relay never
// blocks its successor.
func (r *Relay) lead(ctx context.Context, wake <-chan *pq.Notification) error {
	conn, err := r.db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("relay connection: %w", err)
	}
	defer conn.Close()
	var locked bool
	if err := conn.GetContext(ctx, &locked, `SELECT pg_try_advisory_lock($1)`, r.cfg.LockKey); err != nil {
		return fmt.Errorf("relay lock: %w", err)
	}
	if !locked {
		return nil
	}
	defer func() {
		// Closing the connection would release the lock too; unlocking
		// returns it to the pool clean.
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, r.cfg.LockKey)
	}()
	for {
		// On the lock's own connection: under load the pool's connections
		// are all busy serving requests, and a relay queueing behind them
		// would let the outbox grow however fast it can publish.
		n, err := r.runOnce(ctx, conn)
		if err != nil {
			return err
		}
		if n < r.cfg.BatchSize && !wait(ctx, r.cfg.PollInterval, wake, true) {
			return nil
		}
		if err := conn.PingContext(ctx); err != nil {
			return fmt.Errorf("relay lock connection lost: %w", err)
		}
	}
}

type pendingRow struct {
	ID               int64  `db:"id"`
	EventID          string `db:"event_id"`
	AggregateID      string `db:"aggregate_id"`
	AggregateVersion int64  `db:"aggregate_version"`
	EventType        string `db:"event_type"`
	Topic            string `db:"topic"`
	Payload          []byte `db:"payload"`
	Headers          []byte `db:"headers"`
	Attempts         int    `db:"attempts"`
}

// RunOnce relays one batch and returns how many rows it handled. It skips
// rows whose aggregate has an earlier row still backing off, so a failed
// event is never overtaken by a later one of the same order.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	return r.runOnce(ctx, r.db)
}

// queryer is a pool or one connection of it.
type queryer interface {
	sqlx.QueryerContext
	sqlx.ExecerContext
}

func (r *Relay) runOnce(ctx context.Context, db queryer) (int, error) {
	var rows []pendingRow
	if err := sqlx.SelectContext(ctx, db, &rows, `
		SELECT o.id, o.event_id, o.aggregate_id, o.aggregate_version, o.event_type, o.topic, o.payload, o.headers, o.attempts
		FROM outbox_events o
		WHERE o.status = 'PENDING' AND o.next_attempt_at <= now()
		  AND NOT EXISTS (
		      SELECT 1 FROM outbox_events p
		      WHERE p.status = 'PENDING' AND p.aggregate_id = o.aggregate_id
		        AND p.id < o.id AND p.next_attempt_at > now())
		ORDER BY o.id
		LIMIT $1`, r.cfg.BatchSize); err != nil {
		return 0, fmt.Errorf("poll outbox: %w", err)
	}
	if len(rows) == 0 {
		return 0, nil
	}
	msgs := make([]Message, len(rows))
	for i, row := range rows {
		msgs[i] = Message{EventID: row.EventID, AggregateID: row.AggregateID, AggregateVersion: row.AggregateVersion,
			EventType: row.EventType, Topic: row.Topic, Payload: row.Payload}
		if err := json.Unmarshal(row.Headers, &msgs[i].Headers); err != nil {
			return 0, fmt.Errorf("decode headers of %s: %w", row.EventID, err)
		}
	}
	if err := r.failPoints.Inject(FailPointBeforePublish); err != nil {
		return 0, err
	}
	sent, sendErr := r.sink.Send(ctx, msgs)
	if sent > 0 {
		if err := r.failPoints.Inject(FailPointAfterPublish); err != nil {
			return 0, err
		}
		ids := make([]int64, sent)
		for i := range sent {
			ids[i] = rows[i].ID
		}
		// By primary key: the cheapest look-up of the rows just read.
		if _, err := db.ExecContext(ctx, `
			UPDATE outbox_events SET status = 'SENT', sent_at = now(), attempts = attempts + 1, last_error = NULL
			WHERE id = ANY($1::bigint[])`, pq.Array(ids)); err != nil {
			return 0, fmt.Errorf("mark sent: %w", err)
		}
		r.metrics.sent(sent)
	}
	if sendErr != nil {
		r.metrics.failed(len(rows) - sent)
		r.logger.WarnContext(ctx, "outbox publish failed; rows stay pending",
			"error", sendErr, "failed", len(rows)-sent, "sent", sent)
		for _, row := range rows[sent:] {
			next := time.Now().Add(backoff.Jittered(row.Attempts+1, r.cfg.BackoffInitial, r.cfg.BackoffMax))
			if _, err := db.ExecContext(ctx, `
				UPDATE outbox_events SET attempts = attempts + 1, last_error = $2, next_attempt_at = $3
				WHERE event_id = $1 AND status = 'PENDING'`, row.EventID, truncate(sendErr.Error(), 500), next); err != nil {
				return 0, fmt.Errorf("record failed publish: %w", err)
			}
		}
	}
	return len(rows), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// wait waits d, or until a notification on wake when early is set, or
// until ctx ends; it reports whether ctx is still alive. Notifications that
// do not end the wait are drained, so the listener never blocks on a relay
// that is not leading. (A nil notification means the listener reconnected
// and may have missed some: it wakes the relay too.)
func wait(ctx context.Context, d time.Duration, wake <-chan *pq.Notification, early bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-wake:
			if early {
				return true
			}
		}
	}
}
