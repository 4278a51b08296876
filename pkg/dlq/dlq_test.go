package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

type sent struct {
	topic      string
	key, value string
	headers    map[string]string
}

func TestReplaySendsTheOriginalOnceAndAuditsEveryRequest(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	store := dlq.NewStore(db)
	ctx := context.Background()
	id, err := store.Add(ctx, dlq.Record{Consumer: "inventory-service", EventID: "E-1", AggregateID: "O-1", EventType: "OrderPaid",
		OriginalTopic: "order-events", OriginalPartition: 3, OriginalOffset: 42, Key: []byte("O-1"), Value: []byte(`{"eventId":"E-1"}`),
		Headers: map[string]string{"eventId": "E-1"}, FailureReason: "HANDLER_ERROR: boom", ErrorClass: "RETRYABLE", Attempts: 5,
		FirstFailedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var published []sent
	publish := func(_ context.Context, topic string, key, value []byte, headers map[string]string) error {
		published = append(published, sent{topic, string(key), string(value), headers})
		return nil
	}

	first, err := store.Replay(ctx, id, "alice", publish)
	if err != nil || first.Outcome != dlq.OutcomePending {
		t.Fatalf("first replay %+v, %v", first, err)
	}
	second, err := store.Replay(ctx, id, "bob", publish)
	if err != nil || second.Outcome != dlq.OutcomeAlreadyReplayed {
		t.Fatalf("second replay %+v, %v", second, err)
	}
	if len(published) != 1 {
		t.Fatalf("published %d messages, want 1", len(published))
	}
	if p := published[0]; p.topic != "order-events" || p.key != "O-1" || p.value != `{"eventId":"E-1"}` || p.headers["eventId"] != "E-1" {
		t.Fatalf("replayed %+v, want the original message", p)
	}
	audit, err := store.Replays(ctx, id)
	if err != nil || len(audit) != 2 || audit[0].RequestedBy != "alice" || audit[1].Outcome != dlq.OutcomeAlreadyReplayed {
		t.Fatalf("audit %+v, %v", audit, err)
	}
	recs, _ := store.List(ctx, "O-1")
	if len(recs) != 1 || recs[0].Status != "REPLAYED" {
		t.Fatalf("record after replay %+v", recs)
	}
}

func TestReplayFailureLeavesTheRecordDead(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	store := dlq.NewStore(db)
	ctx := context.Background()
	id, err := store.Add(ctx, dlq.Record{Consumer: "c", EventID: "E-2", AggregateID: "O-2", OriginalTopic: "t",
		Value: []byte("{}"), FailureReason: "x", ErrorClass: "PERMANENT", Attempts: 1, FirstFailedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	down := errors.New("broker down")
	if _, err := store.Replay(ctx, id, "alice", func(context.Context, string, []byte, []byte, map[string]string) error { return down }); !errors.Is(err, down) {
		t.Fatalf("replay error %v", err)
	}
	recs, _ := store.List(ctx, "O-2")
	if recs[0].Status != "DEAD" {
		t.Fatalf("status %s after a failed replay, want DEAD", recs[0].Status)
	}
	if audit, _ := store.Replays(ctx, id); len(audit) != 1 || audit[0].Outcome != dlq.OutcomeFailed {
		t.Fatalf("audit of a failed replay %+v, want one FAILED row", audit)
	}
	if _, err := store.Replay(ctx, 999999, "alice", nil); !errors.Is(err, dlq.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}

// An event dead-lettered again before it is replayed (its DLQ publish
// failed, so it came back and failed again) keeps one DEAD row that counts
// every attempt; after a replay a new failure is a new row.
func TestDeadLetteringAgainCountsAttemptsOnOneRow(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	store := dlq.NewStore(db)
	ctx := context.Background()
	first := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	rec := func(eventID, reason string, failedAt time.Time) dlq.Record {
		return dlq.Record{Consumer: "c", EventID: eventID, AggregateID: "O-3", OriginalTopic: "t", Value: []byte("{}"),
			FailureReason: reason, ErrorClass: "RETRYABLE", Attempts: 3, FirstFailedAt: failedAt}
	}
	const cycles = 4
	var ids []int64
	for i := range cycles {
		id, err := store.Add(ctx, rec("E-3", fmt.Sprintf("cycle %d", i), first.Add(time.Duration(i)*time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Another consumer's dead letter of the same event is its own, and so
	// are messages without an event id.
	for _, r := range []dlq.Record{{Consumer: "other", EventID: "E-3"}, {Consumer: "c"}, {Consumer: "c"}} {
		r.AggregateID, r.OriginalTopic, r.Value, r.FailureReason, r.ErrorClass, r.Attempts, r.FirstFailedAt =
			"O-3", "t", []byte("{}"), "x", "PERMANENT", 1, first
		if _, err := store.Add(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := store.List(ctx, "O-3")
	if err != nil {
		t.Fatal(err)
	}
	var mine []dlq.Record
	for _, r := range recs {
		if r.Consumer == "c" && r.EventID == "E-3" {
			mine = append(mine, r)
		}
	}
	if len(recs) != 4 || len(mine) != 1 {
		t.Fatalf("%d rows, %d of c's E-3; want 4 and 1: %+v", len(recs), len(mine), recs)
	}
	got := mine[0]
	if got.Attempts != 3*cycles || got.FailureReason != fmt.Sprintf("cycle %d", cycles-1) || !got.FirstFailedAt.Equal(first) {
		t.Fatalf("row %+v: want %d attempts, the last reason and the first failure %v", got, 3*cycles, first)
	}
	for _, id := range ids {
		if id != got.ID {
			t.Fatalf("Add returned ids %v, want %d each time", ids, got.ID)
		}
	}

	if _, err := store.Replay(ctx, got.ID, "alice", func(context.Context, string, []byte, []byte, map[string]string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	again, err := store.Add(ctx, rec("E-3", "after the replay", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if again == got.ID {
		t.Fatal("a failure after the replay was counted on the replayed row")
	}
}

// Rows written before the unique key merge into one per event, keeping
// their attempts, earliest failure and replay audit.
func TestMigrationMergesEarlierRows(t *testing.T) {
	first, err := os.ReadFile("migrations/00001_dead_letters.sql")
	if err != nil {
		t.Fatal(err)
	}
	db, _ := postgrestest.NewDatabase(t, postgres.MigrationSet{Name: "dlq", FS: fstest.MapFS{"00001_dead_letters.sql": {Data: first}}})
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, attempts := range []int{5, 5, 2} {
		if _, err := db.Exec(`INSERT INTO dead_letters (consumer, event_id, original_topic, message_value, failure_reason,
				error_class, attempts, first_failed_at) VALUES ('c', 'E-1', 't', '{}', $1, 'RETRYABLE', $2, $3)`,
			fmt.Sprintf("cycle %d", i), attempts, early.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO dlq_replays (dead_letter_id, requested_by, outcome) SELECT min(id), 'alice', 'FAILED' FROM dead_letters`); err != nil {
		t.Fatal(err)
	}
	if err := postgres.Migrate(context.Background(), db, dlq.Schema()); err != nil {
		t.Fatal(err)
	}
	recs, err := dlq.NewStore(db).Find(context.Background(), dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Attempts != 12 || !recs[0].FirstFailedAt.Equal(early) || recs[0].FailureReason != "cycle 2" {
		t.Fatalf("after the migration %+v, want one row: 12 attempts since %v, the last reason", recs, early)
	}
	if audit, err := dlq.NewStore(db).Replays(context.Background(), recs[0].ID); err != nil || len(audit) != 1 {
		t.Fatalf("audit of the kept row %+v, %v; want the earlier row's", audit, err)
	}
}
