package dlq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
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
	if err != nil || first.Outcome != dlq.OutcomeReplayed {
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
