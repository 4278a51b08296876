package versionguard_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// The tutorial's apply_event for a consumer that handles every event of the
// order: the strict version+1 rule falls out of a chain of transitions.
var chain = versionguard.Transitions{
	event.OrderCreated:    {versionguard.InitialState},
	event.OrderCheckedOut: {"CREATED"},
	event.OrderPaid:       {"PENDING_PAYMENT"},
}

var next = map[event.Type]string{event.OrderCreated: "CREATED", event.OrderCheckedOut: "PENDING_PAYMENT", event.OrderPaid: "PAID"}

func TestGuard(t *testing.T) {
	type step struct {
		typ     event.Type
		version int64
		want    versionguard.Outcome
	}
	tests := []struct {
		name      string
		steps     []step
		wantState string
		wantVer   int64
		applied   []event.Type
	}{
		{
			name:      "in order",
			steps:     []step{{event.OrderCreated, 1, versionguard.Applied}, {event.OrderCheckedOut, 2, versionguard.Applied}, {event.OrderPaid, 3, versionguard.Applied}},
			wantState: "PAID", wantVer: 3,
			applied: []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid},
		},
		{
			name:      "PAID(v3) then a late CREATED(v1) is stale and the state does not go back",
			steps:     []step{{event.OrderCreated, 1, versionguard.Applied}, {event.OrderCheckedOut, 2, versionguard.Applied}, {event.OrderPaid, 3, versionguard.Applied}, {event.OrderCreated, 1, versionguard.IgnoredStale}},
			wantState: "PAID", wantVer: 3,
			applied: []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid},
		},
		{
			name:      "a gap waits, and fills in version order",
			steps:     []step{{event.OrderPaid, 3, versionguard.WaitingForGap}, {event.OrderCheckedOut, 2, versionguard.WaitingForGap}, {event.OrderCreated, 1, versionguard.Applied}},
			wantState: "PAID", wantVer: 3,
			applied: []event.Type{event.OrderCreated, event.OrderCheckedOut, event.OrderPaid},
		},
		{
			name:      "a gap that never fills leaves the state where it was",
			steps:     []step{{event.OrderCreated, 1, versionguard.Applied}, {event.OrderPaid, 3, versionguard.WaitingForGap}},
			wantState: "CREATED", wantVer: 1,
			applied: []event.Type{event.OrderCreated},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
			var applied []event.Type
			g := versionguard.New("c", chain, func(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
				applied = append(applied, env.EventType)
				return next[env.EventType], nil
			})
			for i, s := range tt.steps {
				env := event.Envelope{EventID: "E-" + string(rune('a'+i)), EventType: s.typ, AggregateID: "O-1", AggregateVersion: s.version}
				var got versionguard.Outcome
				err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
					var err error
					got, err = g.Handle(context.Background(), uow, env)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				if got != s.want {
					t.Fatalf("step %d (%s v%d): %s, want %s", i, s.typ, s.version, got, s.want)
				}
			}
			state, version, err := versionguard.State(context.Background(), db, "c", "O-1")
			if err != nil {
				t.Fatal(err)
			}
			if state != tt.wantState || version != tt.wantVer {
				t.Errorf("state %s v%d, want %s v%d", state, version, tt.wantState, tt.wantVer)
			}
			if len(applied) != len(tt.applied) {
				t.Fatalf("applied %v, want %v", applied, tt.applied)
			}
			for i := range applied {
				if applied[i] != tt.applied[i] {
					t.Fatalf("applied %v, want %v", applied, tt.applied)
				}
			}
		})
	}
}

func TestGuardRollsBackWithTheSideEffect(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
	boom := errors.New("side effect failed")
	g := versionguard.New("c", chain, func(context.Context, *versionguard.UnitOfWork, event.Envelope, string) (string, error) {
		return "", boom
	})
	err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
		_, err := g.Handle(context.Background(), uow, event.Envelope{EventID: "E-1", EventType: event.OrderCreated, AggregateID: "O-1", AggregateVersion: 1})
		return err
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Handle error %v, want the side effect's", err)
	}
	state, version, err := versionguard.State(context.Background(), db, "c", "O-1")
	if err != nil || state != versionguard.InitialState || version != 0 {
		t.Fatalf("after a failed side effect: %s v%d (%v), want NONE v0", state, version, err)
	}
}

// TestHandleBatchAppliesDistinctAggregatesTogether checks which events of a
// batch reach a set-based apply in one call: the first events of aggregates
// seen once; an aggregate with two events in the batch goes one event per
// call, in order, and still ends in the right state.
func TestHandleBatchAppliesDistinctAggregatesTogether(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
	env := func(agg string, typ event.Type, v int64) event.Envelope {
		return event.Envelope{EventID: agg + "-" + string(typ), EventType: typ, AggregateID: agg, AggregateVersion: v}
	}
	var calls [][]string
	g := versionguard.NewBatch("c", chain, func(_ context.Context, _ *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
		var ids []string
		states := make([]string, len(batch))
		for i, p := range batch {
			ids = append(ids, p.Env.AggregateID+"@"+p.State)
			states[i] = next[p.Env.EventType]
		}
		calls = append(calls, ids)
		return states, nil
	})
	batch := []event.Envelope{
		env("A", event.OrderCreated, 1),
		env("B", event.OrderCreated, 1),
		env("B", event.OrderCheckedOut, 2),
		env("C", event.OrderCreated, 1),
		env("D", event.OrderCheckedOut, 2), // parked: D has no CREATED yet
	}
	var outcomes []versionguard.Outcome
	err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
		var err error
		outcomes, err = g.HandleBatch(context.Background(), uow, batch)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []versionguard.Outcome{versionguard.Applied, versionguard.Applied, versionguard.Applied, versionguard.Applied, versionguard.WaitingForGap}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes = %v, want %v", outcomes, want)
	}
	// B's two events one per call, in order; A and C together, last.
	wantCalls := [][]string{{"B@NONE"}, {"B@CREATED"}, {"A@NONE", "C@NONE"}}
	if !slices.EqualFunc(calls, wantCalls, slices.Equal[[]string]) {
		t.Fatalf("apply calls = %v, want %v", calls, wantCalls)
	}
	for agg, wantState := range map[string]string{"A": "CREATED", "B": "PENDING_PAYMENT", "C": "CREATED", "D": versionguard.InitialState} {
		if state, _, err := versionguard.State(context.Background(), db, "c", agg); err != nil || state != wantState {
			t.Fatalf("state of %s = %q (%v), want %q", agg, state, err, wantState)
		}
	}
}

// TestHandleBatchRejectsAShortAnswer: an apply that returns fewer states than
// events is a bug, and the batch fails instead of recording wrong versions.
func TestHandleBatchRejectsAShortAnswer(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
	g := versionguard.NewBatch("c", chain, func(context.Context, *versionguard.UnitOfWork, []versionguard.Pending) ([]string, error) {
		return nil, nil
	})
	err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
		_, err := g.HandleBatch(context.Background(), uow, []event.Envelope{
			{EventID: "e1", EventType: event.OrderCreated, AggregateID: "A", AggregateVersion: 1},
			{EventID: "e2", EventType: event.OrderCreated, AggregateID: "B", AggregateVersion: 1},
		})
		return err
	})
	if err == nil {
		t.Fatal("HandleBatch accepted 0 states for 2 events")
	}
	if state, _, _ := versionguard.State(context.Background(), db, "c", "A"); state != versionguard.InitialState {
		t.Fatalf("state of A = %q after a failed batch, want %s", state, versionguard.InitialState)
	}
}

// TestLateFactsAreAppliedNotIgnored: a consumer whose effect is one per
// refund (a message to the customer). Refund v5 is dead-lettered, refund v7
// applied; v5 replayed then would be stale. As a late fact it has its
// effect applied, and the state and version stay at v7; a stale event of
// another type is still ignored, and without LateFacts v5 is ignored too.
func TestLateFactsAreAppliedNotIgnored(t *testing.T) {
	refunds := versionguard.Transitions{
		event.OrderPaid:     {versionguard.InitialState},
		event.OrderRefunded: {"PAID", "REFUNDED"},
	}
	step := func(typ event.Type, v int64) event.Envelope {
		return event.Envelope{EventID: "E-" + string(typ) + "-" + string(rune('0'+v)), EventType: typ, AggregateID: "O-1", AggregateVersion: v}
	}
	tests := []struct {
		name      string
		late      bool
		events    []event.Envelope
		want      []versionguard.Outcome
		wantFacts []int64
	}{
		{"a refund replayed after a later one is told", true,
			[]event.Envelope{step(event.OrderPaid, 3), step(event.OrderRefunded, 7), step(event.OrderRefunded, 5), step(event.OrderPaid, 3)},
			[]versionguard.Outcome{versionguard.Applied, versionguard.Applied, versionguard.AppliedLateFact, versionguard.IgnoredStale}, []int64{5}},
		{"without late facts it is lost", false,
			[]event.Envelope{step(event.OrderPaid, 3), step(event.OrderRefunded, 7), step(event.OrderRefunded, 5)},
			[]versionguard.Outcome{versionguard.Applied, versionguard.Applied, versionguard.IgnoredStale}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
			var facts []int64
			g := versionguard.New("c", refunds, func(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
				return map[event.Type]string{event.OrderPaid: "PAID", event.OrderRefunded: "REFUNDED"}[env.EventType], nil
			})
			if tt.late {
				g.WithLateFacts(versionguard.LateFacts{Types: []event.Type{event.OrderRefunded},
					Apply: func(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope) error {
						facts = append(facts, env.AggregateVersion)
						return nil
					}})
			}
			for i, env := range tt.events {
				var got versionguard.Outcome
				if err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
					var err error
					got, err = g.Handle(context.Background(), uow, env)
					return err
				}); err != nil {
					t.Fatal(err)
				}
				if got != tt.want[i] {
					t.Fatalf("event %d (%s v%d): %s, want %s", i, env.EventType, env.AggregateVersion, got, tt.want[i])
				}
			}
			if !slices.Equal(facts, tt.wantFacts) {
				t.Fatalf("late facts applied %v, want %v", facts, tt.wantFacts)
			}
			state, version, err := versionguard.State(context.Background(), db, "c", "O-1")
			if err != nil {
				t.Fatal(err)
			}
			if state != "REFUNDED" || version != 7 {
				t.Fatalf("state %s v%d after %v", state, version, tt.want)
			}
		})
	}
}
