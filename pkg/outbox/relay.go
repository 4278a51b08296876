package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/backoff"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
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

// FailPoints are the relay's fail points, for the process that runs a
// relay to declare (failpoint.Config.Names).
func FailPoints() []string {
	return []string{FailPointBeforePublish, FailPointAfterPublish}
}

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
	// there for the notifications of relays in other processes that were
	// woken (Wake) while not leading, and relays at once instead of at its
	// next poll. Empty: polling only, and a wake reaches only this
	// process's relay.
	ListenURL string
	// LockURL, when set, is the outbox database's URL: the relay holds
	// its lock on a connection of its own there, every read and write of
	// which must finish within half of LeaderTimeout, so a network that
	// goes silent under the leader is noticed in seconds. Empty: the lock
	// is held on a connection of the pool, where only TCP keepalives
	// notice a silent network.
	LockURL string
	// LeaderTimeout is how long a leader's lock connection may stay
	// silent: the leader pings it five times as often and steps down when
	// a ping takes half as long; a replica ends the session of a leader
	// silent for longer and takes over (docs/decisions.md, Relay takeover).
	LeaderTimeout time.Duration
	// Tracing, when set, records a span of each row's send ("outbox send"),
	// continuing the trace of the row's traceparent, and sends the row
	// with the send span's traceparent instead; nil records none.
	Tracing trace.TracerProvider
}

// ReadRelayEnv reads OUTBOX_BATCH_SIZE, OUTBOX_POLL_INTERVAL,
// OUTBOX_BACKOFF_INITIAL, OUTBOX_BACKOFF_MAX and OUTBOX_LEADER_TIMEOUT
// through r, which collects
// the malformed values with the service's own: every service with an
// outbox reads its relay's settings here, under the same names and
// defaults. ListenURL is the caller's: it is the service's database.
func ReadRelayEnv(r *envconfig.Reader) RelayConfig {
	c := DefaultRelayConfig()
	c.BatchSize = r.Int("OUTBOX_BATCH_SIZE", c.BatchSize)
	c.PollInterval = r.Duration("OUTBOX_POLL_INTERVAL", c.PollInterval)
	c.BackoffInitial = r.Duration("OUTBOX_BACKOFF_INITIAL", c.BackoffInitial)
	c.BackoffMax = r.Duration("OUTBOX_BACKOFF_MAX", c.BackoffMax)
	c.LeaderTimeout = r.Duration("OUTBOX_LEADER_TIMEOUT", c.LeaderTimeout)
	return c
}

// notifyChannel is the channel a relay that is not leading notifies when
// it is woken, so that the leader, in another process, relays at once.
const notifyChannel = "outbox_events"

// DefaultRelayConfig returns the defaults documented in README.md (Configuration).
func DefaultRelayConfig() RelayConfig {
	return RelayConfig{
		BatchSize:      2000,
		PollInterval:   100 * time.Millisecond,
		BackoffInitial: time.Second,
		BackoffMax:     30 * time.Second,
		LockKey:        0x6f7574626f78, // "outbox"
		LeaderTimeout:  5 * time.Second,
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
	if c.LeaderTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("OUTBOX_LEADER_TIMEOUT=%s: want at least 100ms", c.LeaderTimeout))
	}
	return errors.Join(errs...)
}

// errLeadershipLost ends a leadership whose lock connection stopped
// answering.
var errLeadershipLost = errors.New("relay lock connection lost")

// Relay moves committed rows from outbox_events to a sink.
type Relay struct {
	db         *sqlx.DB
	sink       Sink
	cfg        RelayConfig
	logger     *slog.Logger
	failPoints *failpoint.Registry
	metrics    *RelayMetrics
	// woken holds a wake not yet acted on; wakes coalesce.
	woken chan struct{}
}

// NewRelay returns a relay; metrics and failPoints may be nil. failPoints
// lets crash tests stop the relay inside its windows.
func NewRelay(db *sqlx.DB, sink Sink, cfg RelayConfig, logger *slog.Logger, metrics *RelayMetrics, failPoints *failpoint.Registry) (*Relay, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Relay{db: db, sink: sink, cfg: cfg, logger: logger, metrics: metrics, failPoints: failPoints,
		woken: make(chan struct{}, 1)}, nil
}

// Wake tells the relay that a transaction which added rows to its outbox
// has committed. A leading relay relays at once instead of at its next
// poll; one that is not leading passes the word on to the leader in
// another process, as a notification on the channel the relays LISTEN to.
// Call it after the commit: a wake before it finds nothing to relay. Wakes
// coalesce and never block, and a row nobody wakes the relay for leaves at
// the next poll.
//
// The writer wakes the relay, rather than a trigger notifying on commit,
// because Postgres serialises the commits of every notifying transaction
// of the whole server on one lock, held through the commit's WAL flush:
// under load the services' transactions would queue there
// (docs/decisions.md, The relay is woken after the commit).
func (r *Relay) Wake() {
	select {
	case r.woken <- struct{}{}:
	default:
	}
}

// Run relays until ctx ends. Only the holder of the advisory lock relays;
// the others retry the lock every poll interval, and replace a holder
// whose lock connection has been silent for LeaderTimeout.
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
	locks := r.db
	if r.cfg.LockURL != "" {
		c, err := postgres.Connector(r.cfg.LockURL, postgres.Timeouts{}, r.cfg.LeaderTimeout/2)
		if err != nil {
			return fmt.Errorf("relay lock: %w", err)
		}
		locks = sqlx.NewDb(sql.OpenDB(c), "postgres")
		defer locks.Close()
	}
	for {
		err := r.lead(ctx, locks, wake)
		pause := r.cfg.PollInterval
		if errors.Is(err, errLeadershipLost) {
			// Stepping back for a leader timeout lets a replica whose
			// database answers take over.
			pause = r.cfg.LeaderTimeout
		}
		if err != nil && ctx.Err() == nil {
			r.logger.WarnContext(ctx, "outbox relay interrupted", "error", err)
		}
		if !r.wait(ctx, pause, wake, false) {
			return nil
		}
	}
}

// lead takes the advisory lock on a connection of locks and, while its
// heartbeat shows the connection answers, relays on a connection of the
// pool. The lock dies with its session, so a crashed relay never blocks
// its successor, and a relay that finds the lock held by a session silent
// for LeaderTimeout ends that session.
func (r *Relay) lead(ctx context.Context, locks *sqlx.DB, wake <-chan *pq.Notification) error {
	lock, err := locks.Connx(ctx)
	if err != nil {
		return fmt.Errorf("relay lock connection: %w", err)
	}
	defer lock.Close()
	var locked bool
	if err := lock.GetContext(ctx, &locked, `SELECT pg_try_advisory_lock($1)`, r.cfg.LockKey); err != nil {
		return fmt.Errorf("relay lock: %w", err)
	}
	if !locked {
		return r.replaceSilentLeader(ctx, lock)
	}
	var session int
	if err := lock.GetContext(ctx, &session, `SELECT pg_backend_pid()`); err != nil {
		r.unlock(ctx, lock)
		return fmt.Errorf("relay lock session: %w", err)
	}
	// The relay works on a connection of its own for as long as it leads:
	// under load the pool's connections are all busy serving requests, and
	// a relay queueing behind them would let the outbox grow however fast
	// it can publish.
	work, err := r.db.Connx(ctx)
	if err != nil {
		r.unlock(ctx, lock)
		return fmt.Errorf("relay connection: %w", err)
	}
	defer work.Close()
	// A row marked SENT leaves its entries in the partial indexes of
	// pending rows until the next vacuum, and under load thousands gather
	// between two. The planner then reads the few pending rows with a
	// bitmap scan, which visits the heap page of every such entry at every
	// poll (milliseconds, growing with the load); an index scan marks the
	// dead entries it meets, so that the next poll skips them. The setting
	// is the relay's session's only, and is reset before the connection
	// goes back to the pool.
	if _, err := work.ExecContext(ctx, `SET enable_bitmapscan = off`); err != nil {
		r.unlock(ctx, lock)
		return fmt.Errorf("relay connection: %w", err)
	}
	defer func() {
		resetCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := work.ExecContext(resetCtx, `RESET enable_bitmapscan`); err != nil {
			// A connection that cannot be reset must not serve anyone else.
			_ = work.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	leadCtx, lose := context.WithCancelCause(ctx)
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		r.heartbeat(leadCtx, lock, lose)
	}()
	err = r.relay(leadCtx, work, session, wake)
	lose(nil)
	<-beating
	if errors.Is(err, errLeadershipLost) {
		return err
	}
	if cause := context.Cause(leadCtx); errors.Is(cause, errLeadershipLost) {
		// The session may still hold the lock on the server; closing the
		// connection, which the failed ping marked bad, is all that is
		// left to do here.
		return cause
	}
	r.unlock(ctx, lock)
	return err
}

// relay relays batch after batch on work until ctx ends. Before each
// batch it checks that session still holds the lock: a replica may have
// ended it, and a batch read after that would be sent by two relays.
func (r *Relay) relay(ctx context.Context, work *sqlx.Conn, session int, wake <-chan *pq.Notification) error {
	for {
		var held bool
		if err := work.GetContext(ctx, &held, `
			SELECT EXISTS (SELECT 1 FROM pg_locks
			               WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND pid = $1
			                 AND classid::bigint = $2 AND objid::bigint = $3)`,
			session, r.cfg.LockKey>>32, r.cfg.LockKey&0xffffffff); err != nil {
			return fmt.Errorf("relay lock check: %w", err)
		}
		if !held {
			return fmt.Errorf("%w: session %d no longer holds the lock", errLeadershipLost, session)
		}
		n, err := r.runOnce(ctx, work)
		if err != nil {
			return err
		}
		if n < r.cfg.BatchSize && !r.wait(ctx, r.cfg.PollInterval, wake, true) {
			return nil
		}
	}
}

// heartbeat pings the lock's connection every fifth of LeaderTimeout and
// ends the leadership with errLeadershipLost when a ping fails or takes
// half of it: the replicas end a session silent for LeaderTimeout, and by
// then this relay has stopped sending.
func (r *Relay) heartbeat(ctx context.Context, lock *sqlx.Conn, lose context.CancelCauseFunc) {
	t := time.NewTicker(r.cfg.LeaderTimeout / 5)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pingCtx, cancel := context.WithTimeout(ctx, r.cfg.LeaderTimeout/2)
		_, err := lock.ExecContext(pingCtx, `SELECT 1`)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			lose(fmt.Errorf("%w: %w", errLeadershipLost, err))
			return
		}
	}
}

// unlock releases the lock, so the connection returns to its pool clean.
func (r *Relay) unlock(ctx context.Context, lock *sqlx.Conn) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.LeaderTimeout)
	defer cancel()
	_, _ = lock.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, r.cfg.LockKey)
}

// replaceSilentLeader ends the session holding the relay's lock when it
// has been idle for longer than LeaderTimeout: a leader pings its lock's
// session five times as often, so such a session belongs to a relay whose
// network, or process, is gone, and the server would keep its lock until
// TCP gave up on it, hours later. The caller takes the lock at its next
// attempt.
func (r *Relay) replaceSilentLeader(ctx context.Context, lock *sqlx.Conn) error {
	var ended []int
	// An advisory lock on a bigint key shows in pg_locks as its high and
	// low 32 bits (classid, objid) with objsubid 1.
	// Materialized, so the session is ended only once every condition
	// holds.
	if err := lock.SelectContext(ctx, &ended, `
		WITH silent AS MATERIALIZED (
			SELECT a.pid
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
			  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND l.classid::bigint = $1 AND l.objid::bigint = $2
			  AND a.state = 'idle' AND a.state_change < clock_timestamp() - make_interval(secs => $3))
		SELECT pid FROM silent WHERE pg_terminate_backend(pid)`,
		r.cfg.LockKey>>32, r.cfg.LockKey&0xffffffff, r.cfg.LeaderTimeout.Seconds()); err != nil {
		return fmt.Errorf("look for a silent relay: %w", err)
	}
	for _, pid := range ended {
		r.logger.WarnContext(ctx, "outbox relay took over from a silent leader", "endedSession", pid,
			"silentFor", r.cfg.LeaderTimeout)
	}
	return nil
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
	spans := r.startSends(ctx, msgs)
	sent, sendErr := r.sink.Send(ctx, msgs)
	endSends(spans, sent, sendErr)
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

// startSends starts the send span of each of msgs, a child of the span
// that wrote the row, and gives each message the traceparent of its send
// span. It returns nil when the relay records no spans.
func (r *Relay) startSends(ctx context.Context, msgs []Message) []trace.Span {
	if r.cfg.Tracing == nil {
		return nil
	}
	tracer := tracing.Tracer(r.cfg.Tracing)
	spans := make([]trace.Span, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		if m.Headers == nil {
			m.Headers = map[string]string{}
		}
		sctx, span := tracer.Start(tracing.Extract(ctx, m.Headers), "outbox send "+m.Topic,
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(semconv.MessagingDestinationName(m.Topic), attribute.String("event.id", m.EventID),
				attribute.String("event.type", m.EventType), attribute.String("event.aggregateId", m.AggregateID)))
		tracing.Inject(sctx, m.Headers)
		spans[i] = span
	}
	return spans
}

// endSends ends the send spans: the first sent were delivered, the rest
// failed with err.
func endSends(spans []trace.Span, sent int, err error) {
	for i, span := range spans {
		if i >= sent && err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// wait waits d, or until ctx ends, and reports whether ctx is still alive.
// A leading relay also stops waiting when it is woken or notified. One
// that is not leading drains the notifications, so the listener never
// blocks on it, and passes a wake on to the leader. (A nil notification
// means the listener reconnected and may have missed some: it wakes the
// relay too.)
func (r *Relay) wait(ctx context.Context, d time.Duration, notes <-chan *pq.Notification, leading bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-notes:
			if leading {
				return true
			}
		case <-r.woken:
			if leading {
				return true
			}
			r.notifyLeader(ctx)
		}
	}
}

// notifyLeader wakes the leading relay of another process; a failure costs
// the rows one poll interval.
func (r *Relay) notifyLeader(ctx context.Context) {
	if _, err := r.db.ExecContext(ctx, `SELECT pg_notify($1, '')`, notifyChannel); err != nil && ctx.Err() == nil {
		r.logger.WarnContext(ctx, "outbox relay: could not notify the leader", "error", err)
	}
}
