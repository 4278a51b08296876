package dlq_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// consumerOutcomes stands in for a consumer's inbox: what it decided about
// each event, and what it will decide once an event is sent back.
type consumerOutcomes struct {
	mu      sync.Mutex
	decided map[string]string
	onSend  map[string]string
}

func (c *consumerOutcomes) Outcome(_ context.Context, _, eventID string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.decided[eventID]
	return o, ok, nil
}

// receive is the consumer handling an event sent back.
func (c *consumerOutcomes) receive(eventID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.onSend[eventID]; ok {
		if _, done := c.decided[eventID]; !done {
			c.decided[eventID] = o
		}
	}
}

func TestReplayAnswersWhatTheConsumerDid(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	ctx := context.Background()
	tests := []struct {
		name    string
		before  string // the consumer's outcome before the replay; "" none
		onSend  string // its outcome once it receives the replay; "" none
		again   bool   // the replay fails and is dead-lettered again
		want    string
		pending bool
	}{
		{"applied", "", "APPLIED", false, dlq.OutcomeApplied, false},
		{"stale", "", "IGNORED_STALE_EVENT", false, dlq.OutcomeIgnoredStale, false},
		{"parked", "", "WAITING_FOR_GAP", false, dlq.OutcomeParked, false},
		{"processed before", "APPLIED", "", false, dlq.OutcomeDuplicate, false},
		{"failed again", "", "", true, dlq.OutcomeDeadLettered, false},
		{"no answer in time", "", "", false, dlq.OutcomePending, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eventID := "E-" + tt.name
			outcomes := &consumerOutcomes{decided: map[string]string{}, onSend: map[string]string{eventID: tt.onSend}}
			if tt.onSend == "" {
				delete(outcomes.onSend, eventID)
			}
			if tt.before != "" {
				outcomes.decided[eventID] = tt.before
			}
			store := dlq.NewStore(db).WithOutcomes(outcomes, 500*time.Millisecond)
			rec := dlq.Record{Consumer: "c", EventID: eventID, AggregateID: "O-" + tt.name, OriginalTopic: "t",
				Value: []byte("{}"), FailureReason: "x", ErrorClass: "RETRYABLE", Attempts: 1, FirstFailedAt: time.Now()}
			id, err := store.Add(ctx, rec)
			if err != nil {
				t.Fatal(err)
			}
			publish := func(context.Context, string, []byte, []byte, map[string]string) error {
				outcomes.receive(eventID)
				if tt.again {
					// The consumer fails it again, after the replay commits.
					go func() {
						if _, err := store.Add(context.Background(), rec); err != nil {
							t.Error(err)
						}
					}()
				}
				return nil
			}
			res, err := store.Replay(ctx, id, "alice", publish)
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tt.want || res.EventID != eventID {
				t.Fatalf("replay %d answered %+v, want %s", i, res, tt.want)
			}
			audit, err := store.Replays(ctx, id)
			if err != nil || len(audit) != 1 || audit[0].Outcome != tt.want {
				t.Fatalf("audit %+v, %v; want one row %s", audit, err, tt.want)
			}
			if !tt.pending {
				return
			}
			// A PENDING replay's record is REPLAYED all the same: a second
			// request sends nothing.
			if res, err := store.Replay(ctx, id, "bob", publish); err != nil || res.Outcome != dlq.OutcomeAlreadyReplayed {
				t.Fatalf("second replay %+v, %v; want ALREADY_REPLAYED", res, err)
			}
		})
	}
}
