// Package outbox is the transactional outbox: an event is written in the
// same transaction as the business change that caused it, and a relay
// delivers committed rows to a sink (Kafka, or HTTP for payment callbacks)
// at least once, keeping the order of each aggregate's events.
package outbox

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates outbox_events.
func Schema() postgres.MigrationSet { return postgres.EmbeddedSet("outbox", migrations) }

// Row statuses.
const (
	StatusPending = "PENDING"
	StatusSent    = "SENT"
)

// ErrNotFound is returned for an event id the outbox does not hold.
var ErrNotFound = errors.New("outbox event not found")

// Message is one row to deliver.
type Message struct {
	EventID          string
	AggregateID      string
	AggregateVersion int64
	EventType        string
	// Topic is the Kafka topic, or the sink's destination name.
	Topic   string
	Payload []byte
	Headers map[string]string
}

// FromEnvelope validates env and turns it into a message for topic.
func FromEnvelope(topic string, env event.Envelope) (Message, error) {
	payload, err := env.Marshal()
	if err != nil {
		return Message{}, err
	}
	return Message{
		EventID:          env.EventID,
		AggregateID:      env.AggregateID,
		AggregateVersion: env.AggregateVersion,
		EventType:        string(env.EventType),
		Topic:            topic,
		Payload:          payload,
		Headers:          env.Headers(),
	}, nil
}

// Add writes msgs in the caller's transaction: they become deliverable
// exactly when the business change commits, and vanish if it rolls back.
// Once the transaction has committed, wake the relay (Relay.Wake), or the
// rows wait for its next poll.
//
// Inside a trace, the write is a span ("outbox write") and each row's
// traceparent header is that span's, so the relay's send, which runs
// later and elsewhere, continues the trace from the row.
func Add(ctx context.Context, tx sqlx.ExecerContext, msgs ...Message) (err error) {
	ctx, span := startWrite(ctx, msgs)
	defer func() { endWrite(span, err) }()
	for _, m := range msgs {
		headers, err := encodeHeaders(ctx, span, m)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, headers)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			m.EventID, m.AggregateID, m.AggregateVersion, m.EventType, m.Topic, m.Payload, headers); err != nil {
			return fmt.Errorf("insert outbox event %s: %w", m.EventID, err)
		}
	}
	return nil
}

// AddWith is Add of msgs joined to change, the business change that causes
// them, in one statement: change runs, and msgs are written only when it
// touched a row, which AddWith reports. change is an INSERT, UPDATE or
// DELETE without RETURNING, whose arguments args are numbered from $1.
// Written apart, the change and its rows are a round trip each; a
// command's transaction is a few round trips, each a wait on the server
// and some CPU on both sides, so AddWith saves one in every command that
// changes one row and emits its events.
func AddWith(ctx context.Context, tx sqlx.ExecerContext, change string, args []any, msgs ...Message) (changed bool, err error) {
	ctx, span := startWrite(ctx, msgs)
	defer func() { endWrite(span, err) }()
	var q strings.Builder
	q.WriteString("WITH change AS (" + change + " RETURNING 1)\n")
	if len(msgs) == 0 {
		q.WriteString("SELECT FROM change")
	} else {
		q.WriteString("INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, headers)\n")
	}
	all := slices.Clip(args)
	for i, m := range msgs {
		headers, err := encodeHeaders(ctx, span, m)
		if err != nil {
			return false, err
		}
		if i > 0 {
			q.WriteString("UNION ALL\n")
		}
		n := len(all)
		// The casts give the arguments the columns' types, which a SELECT
		// list does not take from the INSERT's target.
		fmt.Fprintf(&q, "SELECT $%d::text, $%d::text, $%d::bigint, $%d::text, $%d::text, $%d::jsonb, $%d::jsonb WHERE EXISTS (SELECT FROM change)\n",
			n+1, n+2, n+3, n+4, n+5, n+6, n+7)
		all = append(all, m.EventID, m.AggregateID, m.AggregateVersion, m.EventType, m.Topic, m.Payload, headers)
	}
	res, err := tx.ExecContext(ctx, q.String(), all...)
	if err != nil {
		return false, fmt.Errorf("change with %d outbox events: %w", len(msgs), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("change with %d outbox events: %w", len(msgs), err)
	}
	return n > 0, nil
}

// startWrite starts the span of an outbox write of msgs.
func startWrite(ctx context.Context, msgs []Message) (context.Context, trace.Span) {
	ctx, span := tracing.FromContext(ctx).Start(ctx, "outbox write", trace.WithAttributes(attribute.Int("outbox.rows", len(msgs))))
	if span.SpanContext().IsValid() && len(msgs) == 1 {
		span.SetAttributes(attribute.String("event.id", msgs[0].EventID), attribute.String("event.type", msgs[0].EventType),
			semconv.MessagingDestinationName(msgs[0].Topic))
	}
	return ctx, span
}

// endWrite ends the span of an outbox write that returned err.
func endWrite(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// encodeHeaders is m's headers as the row stores them, with the write
// span's traceparent inside a trace.
func encodeHeaders(ctx context.Context, span trace.Span, m Message) ([]byte, error) {
	headers := m.Headers
	if span.SpanContext().IsValid() {
		headers = maps.Clone(m.Headers)
		if headers == nil {
			headers = map[string]string{}
		}
		tracing.Inject(ctx, headers)
	}
	raw, err := json.Marshal(headers)
	if err != nil {
		return nil, fmt.Errorf("encode outbox headers: %w", err)
	}
	return raw, nil
}

// Status is what the admin API shows of one row.
type Status struct {
	EventID       string     `db:"event_id" json:"eventId"`
	EventType     string     `db:"event_type" json:"eventType"`
	Status        string     `db:"status" json:"status"`
	Attempts      int        `db:"attempts" json:"attempts"`
	LastError     *string    `db:"last_error" json:"lastError,omitempty"`
	NextAttemptAt time.Time  `db:"next_attempt_at" json:"nextAttemptAt"`
	CreatedAt     time.Time  `db:"created_at" json:"createdAt"`
	SentAt        *time.Time `db:"sent_at" json:"sentAt,omitempty"`
	// RepublishedBy and RepublishedAt say who last made the row due again
	// (Republish), and when.
	RepublishedBy *string    `db:"republished_by" json:"republishedBy,omitempty"`
	RepublishedAt *time.Time `db:"republished_at" json:"republishedAt,omitempty"`
	// TraceID is the trace the row was written in (its traceparent
	// header), which the relay's send continues: how the console finds an
	// order's traces. Empty for a row written outside a trace.
	TraceID string `db:"trace_id" json:"traceId,omitempty"`
}

// statusColumns are the columns of a Status; trace_id is the trace id of
// the row's W3C traceparent header (version-trace-parent-flags).
const statusColumns = `event_id, event_type, status, attempts, last_error, next_attempt_at, created_at, sent_at,
		       republished_by, republished_at, COALESCE(split_part(headers->>'traceparent', '-', 2), '') AS trace_id`

// Lookup returns the row of eventID.
func Lookup(ctx context.Context, q sqlx.QueryerContext, eventID string) (Status, error) {
	var s Status
	err := sqlx.GetContext(ctx, q, &s, `SELECT `+statusColumns+` FROM outbox_events WHERE event_id = $1`, eventID)
	if errors.Is(err, sql.ErrNoRows) {
		return Status{}, fmt.Errorf("%w: %s", ErrNotFound, eventID)
	}
	if err != nil {
		return Status{}, fmt.Errorf("look up outbox event: %w", err)
	}
	return s, nil
}

// ForAggregate returns the rows of aggregateID in the order the relay sends
// them, so an operator (or an outage drill) follows one order's messages —
// a payment's callbacks, say, whose event ids no other API shows.
func ForAggregate(ctx context.Context, q sqlx.QueryerContext, aggregateID string) ([]Status, error) {
	out := []Status{}
	if err := sqlx.SelectContext(ctx, q, &out, `SELECT `+statusColumns+`
		FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, aggregateID); err != nil {
		return nil, fmt.Errorf("outbox rows of %s: %w", aggregateID, err)
	}
	return out, nil
}

// Backlog is the relay's backlog: how many rows wait and how old the oldest is.
type Backlog struct {
	Pending   int           `json:"pending"`
	OldestAge time.Duration `json:"oldestAge"`
}

// PendingBacklog measures the backlog.
func PendingBacklog(ctx context.Context, q sqlx.QueryerContext) (Backlog, error) {
	var row struct {
		N      int             `db:"n"`
		Oldest sql.NullFloat64 `db:"oldest"`
	}
	if err := sqlx.GetContext(ctx, q, &row, `
		SELECT count(*) AS n, EXTRACT(EPOCH FROM now() - min(created_at))::float8 AS oldest
		FROM outbox_events WHERE status = 'PENDING'`); err != nil {
		return Backlog{}, fmt.Errorf("measure outbox backlog: %w", err)
	}
	return Backlog{Pending: row.N, OldestAge: time.Duration(row.Oldest.Float64 * float64(time.Second))}, nil
}

// Republish makes the row of eventID PENDING again and due now, so the
// relay sends it once more with the same event id; consumers deduplicate
// it. It is how an operator, or reconciliation, repairs a message a
// consumer never received (its offset skipped, its dead letter lost)
// without writing the event anew. attempts keeps counting; a row that is
// already PENDING only becomes due now, overriding its backoff. A SENT row
// enters the backlog anew: its created_at becomes now, so its pending age
// (outbox_oldest_pending_age_seconds, and reconciliation's stuck check)
// counts from the republish, not from the event's first commit. The relay
// is woken through the channel the relays listen to, so it does not wait
// for its next poll. It returns the row as Lookup shows it, or an error
// wrapping ErrNotFound. by, who asks, is recorded on the row.
func Republish(ctx context.Context, q sqlx.ExtContext, eventID, by string) (Status, error) {
	var s Status
	err := sqlx.GetContext(ctx, q, &s, `
		UPDATE outbox_events
		SET created_at = CASE WHEN status = 'SENT' THEN now() ELSE created_at END,
		    status = 'PENDING', next_attempt_at = now(), sent_at = NULL,
		    republished_by = $2, republished_at = now()
		WHERE event_id = $1
		RETURNING `+statusColumns, eventID, by)
	if errors.Is(err, sql.ErrNoRows) {
		return Status{}, fmt.Errorf("%w: %s", ErrNotFound, eventID)
	}
	if err != nil {
		return Status{}, fmt.Errorf("republish outbox event %s: %w", eventID, err)
	}
	// Delivered on commit (at once outside a transaction); a lost
	// notification costs one poll interval.
	if _, err := q.ExecContext(ctx, `SELECT pg_notify($1, '')`, notifyChannel); err != nil {
		return Status{}, fmt.Errorf("wake the relay for %s: %w", eventID, err)
	}
	return s, nil
}

// Event is one outbox row of an aggregate as a reconciliation view shows
// it: which event it carries and where the relay stands with it.
type Event struct {
	AggregateID      string     `db:"aggregate_id" json:"-"`
	EventID          string     `db:"event_id" json:"eventId"`
	EventType        string     `db:"event_type" json:"eventType"`
	AggregateVersion int64      `db:"aggregate_version" json:"aggregateVersion"`
	Status           string     `db:"status" json:"status"`
	Attempts         int        `db:"attempts" json:"attempts"`
	CreatedAt        time.Time  `db:"created_at" json:"createdAt"`
	NextAttemptAt    time.Time  `db:"next_attempt_at" json:"nextAttemptAt"`
	SentAt           *time.Time `db:"sent_at" json:"sentAt,omitempty"`
}

// ForAggregates returns the rows of many aggregates with one statement,
// each aggregate's oldest first (the order the relay sends them), times in
// UTC. An aggregate without rows has none in the map.
func ForAggregates(ctx context.Context, q sqlx.QueryerContext, aggregateIDs []string) (map[string][]Event, error) {
	var rows []Event
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT aggregate_id, event_id, event_type, aggregate_version, status, attempts, created_at, next_attempt_at, sent_at
		FROM outbox_events WHERE aggregate_id = ANY($1) ORDER BY id`, pq.Array(aggregateIDs)); err != nil {
		return nil, fmt.Errorf("outbox rows of %d aggregates: %w", len(aggregateIDs), err)
	}
	out := make(map[string][]Event, len(aggregateIDs))
	for _, e := range rows {
		e.CreatedAt, e.NextAttemptAt = e.CreatedAt.UTC(), e.NextAttemptAt.UTC()
		if e.SentAt != nil {
			sent := e.SentAt.UTC()
			e.SentAt = &sent
		}
		out[e.AggregateID] = append(out[e.AggregateID], e)
	}
	return out, nil
}
