package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

func TestOutstanding(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	store := dlq.NewStore(db)
	ctx := context.Background()
	add := func(consumer, eventID, aggregateID string) int64 {
		t.Helper()
		id, err := store.Add(ctx, dlq.Record{Consumer: consumer, EventID: eventID, AggregateID: aggregateID, EventType: "OrderPaid",
			OriginalTopic: "order-events", Value: []byte("{}"), FailureReason: "HANDLER_ERROR: " + eventID,
			ErrorClass: "RETRYABLE", Attempts: 5, FirstFailedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	replay := func(id int64) {
		t.Helper()
		if _, err := store.Replay(ctx, id, "test", func(context.Context, string, []byte, []byte, map[string]string) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	dead1 := add("c", "E-1", "O-1")
	replay(add("c", "E-2", "O-1")) // replayed, and it came back:
	dead2 := add("c", "E-2", "O-1")
	replay(add("other", "E-1", "O-1")) // another consumer's replay says nothing of c's E-1
	add("other", "E-9", "O-1")
	replay(add("c", "E-3", "O-2")) // replayed and gone

	// describe renders a dead letter as "id eventId replayedBefore".
	describe := func(ds []dlq.Outstanding) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = fmt.Sprintf("%d %s %t", d.ID, d.EventID, d.ReplayedBefore)
		}
		return out
	}
	tests := []struct {
		name string
		ids  []string
		want map[string][]string
	}{
		{
			name: "DEAD ones of this consumer, oldest first, with a replay of the same event marked",
			ids:  []string{"O-1"},
			want: map[string][]string{"O-1": {fmt.Sprintf("%d E-1 false", dead1), fmt.Sprintf("%d E-2 true", dead2)}},
		},
		{
			name: "replayed ones and unknown aggregates have none",
			ids:  []string{"O-2", "O-3"},
			want: map[string][]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.Outstanding(ctx, "c", tt.ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Outstanding = %v, want %v", got, tt.want)
			}
			for id, want := range tt.want {
				if fmt.Sprint(describe(got[id])) != fmt.Sprint(want) {
					t.Errorf("%s: %v, want %v", id, describe(got[id]), want)
				}
			}
		})
	}
	o1, err := store.Outstanding(ctx, "c", []string{"O-1"})
	if err != nil {
		t.Fatal(err)
	}
	d := o1["O-1"][0]
	if d.EventType != "OrderPaid" || d.ErrorClass != "RETRYABLE" || d.FailureReason != "HANDLER_ERROR: E-1" ||
		d.DeadLetteredAt.IsZero() || d.DeadLetteredAt.Location() != time.UTC {
		t.Fatalf("first dead letter %+v", d)
	}
}
