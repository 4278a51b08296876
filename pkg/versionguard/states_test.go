package versionguard_test

import (
	"context"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

func TestStates(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema())
	apply := func(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
		return next[env.EventType], nil
	}
	handle := func(consumer string, envs ...event.Envelope) {
		t.Helper()
		g := versionguard.New(consumer, chain, apply)
		for _, env := range envs {
			if err := versionguard.InUnitOfWork(context.Background(), db, func(uow *versionguard.UnitOfWork) error {
				_, err := g.Handle(context.Background(), uow, env)
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	ev := func(id string, typ event.Type, agg string, v int64) event.Envelope {
		return event.Envelope{EventID: id, EventType: typ, AggregateID: agg, AggregateVersion: v}
	}
	handle("c", ev("E-1", event.OrderCreated, "O-1", 1), ev("E-2", event.OrderCheckedOut, "O-1", 2))
	handle("c", ev("E-3", event.OrderPaid, "O-parked", 3)) // waits for its gap
	handle("other", ev("E-4", event.OrderCreated, "O-other", 1))

	tests := []struct {
		name string
		ids  []string
		want map[string]versionguard.Position
	}{
		{
			name: "applied, parked and never seen",
			ids:  []string{"O-1", "O-parked", "O-never"},
			want: map[string]versionguard.Position{
				"O-1":      {Version: 2, State: "PENDING_PAYMENT"},
				"O-parked": {Version: 0, State: versionguard.InitialState},
				"O-never":  {Version: 0, State: versionguard.InitialState},
			},
		},
		{
			name: "another consumer's aggregate is never seen by this one",
			ids:  []string{"O-other"},
			want: map[string]versionguard.Position{"O-other": {Version: 0, State: versionguard.InitialState}},
		},
		{
			name: "no ids",
			ids:  []string{},
			want: map[string]versionguard.Position{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := versionguard.States(context.Background(), db, "c", tt.ids)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("States = %v, want %v", got, tt.want)
			}
			for id, want := range tt.want {
				if got[id] != want {
					t.Errorf("%s: %+v, want %+v", id, got[id], want)
				}
			}
		})
	}
}
