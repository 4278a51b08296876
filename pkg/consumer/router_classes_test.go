package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// classified rejects the events it was told to as a business outcome and
// applies every other event, counting each event's runs.
type classified struct {
	mu     sync.Mutex
	reject map[string]bool
	runs   map[string]int
}

func (c *classified) handle(_ context.Context, env event.Envelope) (versionguard.Outcome, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[env.EventID]++
	if c.reject[env.EventID] {
		return "", consumer.Rejection("INSUFFICIENT_STOCK", errors.New("SKU-1 has 0 left"))
	}
	return versionguard.Applied, nil
}

func (c *classified) rejectEvent(eventID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reject[eventID] = true
}

func (c *classified) count(eventID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[eventID]
}

// mutated returns env's JSON with change applied to its decoded form.
func mutated(t *testing.T, env event.Envelope, change func(m map[string]any)) []byte {
	t.Helper()
	raw, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	change(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// docs/design.md, Error classes, per class: a schema violation and an unknown
// eventVersion are dead-lettered at once (one attempt, PERMANENT); a
// business rejection is acknowledged with no retry and no dead letter. Each
// case is followed on its partition by a valid event of the same order,
// which is handled only once the case's message was acknowledged.
func TestRouterHandlesEachFailureClass(t *testing.T) {
	h := &classified{reject: map[string]bool{}, runs: map[string]int{}}
	retry := consumer.RetryConfig{MaxAttempts: 4, InitialInterval: 20 * time.Millisecond, MaxInterval: 50 * time.Millisecond}
	f := startRouter(t, 4, retry, h.handle)

	tests := []struct {
		name        string
		order       string
		value       func(t *testing.T, env event.Envelope) []byte
		wantDLQ     bool
		wantReason  string
		reject      bool
		wantHandled int // runs of the handler for the case's event
	}{
		{
			name:  "schema violation",
			order: "O-SCHEMA",
			value: func(t *testing.T, env event.Envelope) []byte {
				return mutated(t, env, func(m map[string]any) { delete(m["data"].(map[string]any), "paymentId") })
			},
			wantDLQ: true, wantReason: event.ReasonSchemaViolation,
		},
		{
			name:  "unknown eventVersion",
			order: "O-VERSION",
			value: func(t *testing.T, env event.Envelope) []byte {
				return mutated(t, env, func(m map[string]any) { m["eventVersion"] = 99 })
			},
			wantDLQ: true, wantReason: event.ReasonUnknownVersion,
		},
		{
			name:  "business rejection",
			order: "O-REJECTED",
			value: func(t *testing.T, env event.Envelope) []byte {
				raw, err := env.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				return raw
			},
			reject: true, wantHandled: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := orderPaid(t, tt.order)
			next := paidAt(t, tt.order, 4)
			if tt.reject {
				h.rejectEvent(env.EventID)
			}
			f.publishRecords(t, &kgo.Record{Topic: f.topic, Key: []byte(tt.order), Value: tt.value(t, env),
				Headers: []kgo.RecordHeader{{Key: "eventId", Value: []byte(env.EventID)}, {Key: "aggregateId", Value: []byte(tt.order)}}})
			f.publish(t, next)
			poll.Until(t, 20*time.Second, "the order's next event handled", func() bool { return h.count(next.EventID) == 1 })

			if got := h.count(env.EventID); got != tt.wantHandled {
				t.Errorf("handler ran %d times for the event, want %d", got, tt.wantHandled)
			}
			recs, _ := f.recorder.find(tt.order)
			if !tt.wantDLQ {
				if len(recs) != 0 {
					t.Errorf("dead letters %+v, want none", recs)
				}
				if dead := recordsWithKey(t, f.brokers, f.dlqTopic, tt.order); len(dead) != 0 {
					t.Errorf("%d DLQ topic messages, want none", len(dead))
				}
				return
			}
			if len(recs) != 1 {
				t.Fatalf("%d dead letters, want 1", len(recs))
			}
			r := recs[0]
			if r.ErrorClass != string(consumer.Permanent) || r.Attempts != 1 || r.EventID != env.EventID ||
				!strings.HasPrefix(r.FailureReason, tt.wantReason+": ") || strings.Count(r.FailureReason, tt.wantReason) != 1 {
				t.Errorf("dead letter %+v, want PERMANENT after 1 attempt with reason %s, named once", r, tt.wantReason)
			}
			dead := recordsWithKey(t, f.brokers, f.dlqTopic, tt.order)
			if len(dead) != 1 {
				t.Fatalf("%d DLQ topic messages, want 1", len(dead))
			}
			if h := headerMap(dead[0]); h["errorClass"] != "PERMANENT" || h["attempts"] != "1" || h["eventId"] != env.EventID {
				t.Errorf("DLQ message headers %v, want errorClass PERMANENT, attempts 1 and the eventId", h)
			}
		})
	}

	// Nothing of the three was retried.
	if got := gatherSum(t, f.reg, "consumer_retries_total"); got != 0 {
		t.Errorf("consumer_retries_total = %v, want 0", got)
	}
	if got := labelled(t, f.reg, "consumer_messages_total", "outcome", "rejected"); got != 1 {
		t.Errorf(`consumer_messages_total{outcome="rejected"} = %v, want 1`, got)
	}
	if got := labelled(t, f.reg, "consumer_dead_letters_total", "error_class", "PERMANENT"); got != 2 {
		t.Errorf(`consumer_dead_letters_total{error_class="PERMANENT"} = %v, want 2`, got)
	}
}

// labelled sums the samples of counter name whose label has value.
func labelled(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
