package retention_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/retention"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

const day = 24 * time.Hour

// now is the tests' clock: rows are written at moments relative to it.
var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func newDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, outbox.Schema(), inbox.Schema(), versionguard.Schema(), dlq.Schema(), effectsSet)
	return db
}

func exec(t *testing.T, db *sqlx.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func ids(t *testing.T, db *sqlx.DB, q string) string {
	t.Helper()
	var got []string
	if err := db.Select(&got, q); err != nil {
		t.Fatal(err)
	}
	return strings.Join(got, ",")
}

func addOutbox(t *testing.T, db *sqlx.DB, id, status string, sentAgo time.Duration) {
	t.Helper()
	var sent any
	if status == outbox.StatusSent {
		sent = now.Add(-sentAgo)
	}
	exec(t, db, `INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload, status, created_at, sent_at)
		VALUES ($1, 'O-1', 1, 'OrderCreated', 'order-events', '{}', $2, $3, $4)`, id, status, now.Add(-sentAgo-time.Minute), sent)
}

func addDeadLetter(t *testing.T, db *sqlx.DB, eventID, status string, lettered time.Duration, replays ...time.Duration) {
	t.Helper()
	var id int64
	if err := db.Get(&id, `INSERT INTO dead_letters (consumer, event_id, original_topic, message_value, failure_reason, error_class,
			attempts, first_failed_at, dead_lettered_at, status)
		VALUES ('c', $1, 'order-events', '\x7b7d', 'boom', 'PERMANENT', 1, $2, $2, $3) RETURNING id`,
		eventID, now.Add(-lettered), status); err != nil {
		t.Fatal(err)
	}
	for _, ago := range replays {
		exec(t, db, `INSERT INTO dlq_replays (dead_letter_id, requested_by, requested_at, outcome) VALUES ($1, 'op', $2, 'APPLIED')`,
			id, now.Add(-ago))
	}
}

// TestRulesDeleteOnlyRowsPastTheirWindow: each shared table loses exactly
// the finished rows older than its window; newer rows, unsent outbox rows
// and unresolved dead letters stay, however old.
func TestRulesDeleteOnlyRowsPastTheirWindow(t *testing.T) {
	db := newDB(t)
	addOutbox(t, db, "sent-old", outbox.StatusSent, 8*day)
	addOutbox(t, db, "sent-new", outbox.StatusSent, 6*day)
	addOutbox(t, db, "pending-old", outbox.StatusPending, 30*day)
	for id, ago := range map[string]time.Duration{"seen-old": 8 * day, "seen-new": 6 * day} {
		exec(t, db, `INSERT INTO processed_events (consumer, event_id, processed_at) VALUES ('c', $1, $2)`, id, now.Add(-ago))
	}
	addDeadLetter(t, db, "replayed-old", "REPLAYED", 40*day, 35*day)
	addDeadLetter(t, db, "replayed-old-no-replay-row", "REPLAYED", 31*day)
	addDeadLetter(t, db, "replayed-recently", "REPLAYED", 40*day, 35*day, 2*day)
	addDeadLetter(t, db, "replayed-new", "REPLAYED", 10*day, 9*day)
	addDeadLetter(t, db, "dead-old", "DEAD", 90*day)

	reg := prometheus.NewRegistry()
	p := retention.New(db, retention.Config{Now: func() time.Time { return now }}, reg,
		outbox.RetentionRule(7*day), inbox.RetentionRule(7*day), dlq.RetentionRule(30*day))
	deleted, err := p.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table   string
		query   string
		kept    string
		deleted int64
	}{
		{"outbox_events", `SELECT event_id FROM outbox_events ORDER BY event_id`, "pending-old,sent-new", 1},
		{"processed_events", `SELECT event_id FROM processed_events ORDER BY event_id`, "seen-new", 1},
		{"dead_letters", `SELECT event_id FROM dead_letters ORDER BY event_id`, "dead-old,replayed-new,replayed-recently", 2},
	}
	for _, tt := range tests {
		t.Run(tt.table, func(t *testing.T) {
			if got := ids(t, db, tt.query); got != tt.kept {
				t.Errorf("kept %q, want %q", got, tt.kept)
			}
			if deleted[tt.table] != tt.deleted {
				t.Errorf("Prune reports %d deleted, want %d", deleted[tt.table], tt.deleted)
			}
			if got := deletedMetric(t, reg, tt.table); got != float64(tt.deleted) {
				t.Errorf("retention_deleted_rows_total = %v, want %d", got, tt.deleted)
			}
		})
	}
	var orphans int
	if err := db.Get(&orphans, `SELECT count(*) FROM dlq_replays r WHERE NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.id = r.dead_letter_id)`); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d replays of deleted dead letters left", orphans)
	}
}

// deletedMetric is retention_deleted_rows_total{table} as reg exposes it.
func deletedMetric(t *testing.T, reg *prometheus.Registry, table string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "retention_deleted_rows_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no retention_deleted_rows_total{table=%q}", table)
	return 0
}

// TestPruneDeletesInBatches: a backlog larger than a batch is deleted by
// one pass, one batch per statement.
func TestPruneDeletesInBatches(t *testing.T) {
	db := newDB(t)
	exec(t, db, `INSERT INTO processed_events (consumer, event_id, processed_at)
		SELECT 'c', 'E-' || i, $1 FROM generate_series(1, 25) i`, now.Add(-8*day))
	p := retention.New(db, retention.Config{Batch: 4, Now: func() time.Time { return now }}, prometheus.NewRegistry(),
		inbox.RetentionRule(7*day))
	deleted, err := p.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if deleted["processed_events"] != 25 {
		t.Fatalf("deleted %d, want all 25", deleted["processed_events"])
	}
	if got := ids(t, db, `SELECT event_id FROM processed_events`); got != "" {
		t.Fatalf("left %s", got)
	}
}

// TestPruneSkipsRowsTheHotPathHolds: a row past its window that a
// transaction has locked is skipped, not waited for, and deleted by a
// later pass.
func TestPruneSkipsRowsTheHotPathHolds(t *testing.T) {
	db := newDB(t)
	addOutbox(t, db, "held", outbox.StatusSent, 8*day)
	addOutbox(t, db, "free", outbox.StatusSent, 8*day)
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	// Releases the lock should the test stop before its own Rollback;
	// after that Rollback it is a no-op.
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`SELECT 1 FROM outbox_events WHERE event_id = 'held' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	p := retention.New(db, retention.Config{Now: func() time.Time { return now }}, prometheus.NewRegistry(),
		outbox.RetentionRule(7*day))
	// A pass that waited for the lock would run into this deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Prune(ctx); err != nil {
		t.Fatalf("prune while a row is held: %v", err)
	}
	if got := ids(t, db, `SELECT event_id FROM outbox_events`); got != "held" {
		t.Fatalf("left %q, want only the held row", got)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, db, `SELECT event_id FROM outbox_events`); got != "" {
		t.Fatalf("left %q after the lock was released", got)
	}
}

// effectsSet records every effect a consumer applies, so the dedup test
// counts effects rather than trusting outcomes.
var effectsSet = postgres.MigrationSet{Name: "effects", FS: fstest.MapFS{"00001_effects.sql": {Data: []byte(
	"-- +goose Up\nCREATE TABLE effects (id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL);\n")}}}

// TestReplayInsideTheWindowIsDeduplicated: an event delivered again after
// a pass of the pruner, inside the dedup window, is recognised as a
// duplicate and applied once; past the window its dedup row is gone.
func TestReplayInsideTheWindowIsDeduplicated(t *testing.T) {
	db := newDB(t)
	ctx := context.Background()
	guard := versionguard.New("c", versionguard.Transitions{event.OrderCreated: {versionguard.InitialState}},
		func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
			_, err := uow.Tx().ExecContext(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, env.EventID)
			return "CREATED", err
		})
	proc := inbox.NewProcessor(db, "c", guard)
	created := event.Envelope{EventID: "E-1", EventType: event.OrderCreated, EventVersion: 1,
		AggregateID: "O-1", AggregateVersion: 1, Data: []byte(`{}`)}
	if out, err := proc.Process(ctx, created); err != nil || out != versionguard.Applied {
		t.Fatalf("first delivery: %v, %v", out, err)
	}
	var processedAt time.Time
	if err := db.Get(&processedAt, `SELECT processed_at FROM processed_events WHERE event_id = 'E-1'`); err != nil {
		t.Fatal(err)
	}
	const window = 7 * day
	prune := func(at time.Time) {
		t.Helper()
		p := retention.New(db, retention.Config{Now: func() time.Time { return at }}, prometheus.NewRegistry(),
			inbox.RetentionRule(window))
		if _, err := p.Prune(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The broker's retention and a rewind bring the event back on the
	// window's last day.
	prune(processedAt.Add(window - time.Hour))
	out, err := proc.Process(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	if out != inbox.Duplicate {
		t.Fatalf("replay inside the window: %s, want %s", out, inbox.Duplicate)
	}
	if got := ids(t, db, `SELECT event_id FROM effects`); got != "E-1" {
		t.Fatalf("effects %q, want one", got)
	}
	prune(processedAt.Add(window + time.Hour))
	if n, err := inbox.Count(ctx, db, "c", "E-1"); err != nil || n != 0 {
		t.Fatalf("dedup rows past the window: %d, %v; want none", n, err)
	}
}

// TestRunStopsWithItsContext: Run prunes at once, and returns when its
// context ends.
func TestRunStopsWithItsContext(t *testing.T) {
	db := newDB(t)
	addOutbox(t, db, "sent-old", outbox.StatusSent, 8*day)
	p := retention.New(db, retention.Config{Interval: time.Hour}, prometheus.NewRegistry(), outbox.RetentionRule(7*day))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, func(err error) { t.Errorf("prune: %v", err) }) }()
	poll.Until(t, 10*time.Second, "the first pass at start", func() bool {
		return ids(t, db, `SELECT event_id FROM outbox_events`) == ""
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// TestSizeCollector: db_table_size_bytes has a positive size for each
// table that exists, and no series for one that does not.
func TestSizeCollector(t *testing.T) {
	db := newDB(t)
	c := retention.NewSizeCollector(db, slog.New(slog.NewTextHandler(io.Discard, nil)),
		"outbox_events", "processed_events", "no_such_table")
	if n := testutil.CollectAndCount(c, "db_table_size_bytes"); n != 2 {
		t.Fatalf("%d series, want 2", n)
	}
	sizes, err := retention.Sizes(context.Background(), db, "outbox_events", "no_such_table")
	if err != nil {
		t.Fatal(err)
	}
	if sizes["outbox_events"] <= 0 || len(sizes) != 1 {
		t.Fatalf("sizes %v, want outbox_events only, above 0", sizes)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  retention.Config
		want string
	}{
		{retention.Config{}, ""},
		{retention.Config{Interval: time.Minute, Batch: 500}, ""},
		{retention.Config{Interval: time.Millisecond}, "RETENTION_INTERVAL"},
		{retention.Config{Batch: retention.MaxBatch + 1}, "RETENTION_BATCH"},
		{retention.Config{Batch: -1}, "RETENTION_BATCH"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.cfg), func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
