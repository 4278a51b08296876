package admin_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

func TestFactsReader(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema(), dlq.Schema())
	ctx := context.Background()
	g := versionguard.New("c", versionguard.Transitions{event.OrderPaid: {versionguard.InitialState}},
		func(context.Context, *versionguard.UnitOfWork, event.Envelope, string) (string, error) {
			return "PAID", nil
		})
	if err := versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
		_, err := g.Handle(ctx, uow, event.Envelope{EventID: "E-1", EventType: event.OrderPaid, AggregateID: "O-1", AggregateVersion: 3})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := dlq.NewStore(db).Add(ctx, dlq.Record{Consumer: "c", EventID: "E-2", AggregateID: "O-1", EventType: "OrderRefunded",
		OriginalTopic: "order-events", Value: []byte("{}"), FailureReason: "boom", ErrorClass: "PERMANENT", Attempts: 1,
		FirstFailedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	var ownRan bool
	facts, err := admin.NewFactsReader(db, "c").Read(ctx, []string{"O-1", "O-2"}, func(q sqlx.QueryerContext) error {
		var n int
		ownRan = true
		return sqlx.GetContext(ctx, q, &n, `SELECT count(*) FROM aggregate_versions`)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !ownRan {
		t.Fatal("the service's own read did not run")
	}
	raw, err := json.Marshal(facts["O-2"])
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"consumer":{"version":0,"state":"NONE"},"deadLetters":[]}` {
		t.Fatalf("an order never seen: %s", raw)
	}
	o1 := facts["O-1"]
	if o1.Consumer != (versionguard.Position{Version: 3, State: "PAID"}) || len(o1.DeadLetters) != 1 ||
		o1.DeadLetters[0].EventID != "E-2" || o1.DeadLetters[0].ErrorClass != "PERMANENT" || o1.DeadLetters[0].ReplayedBefore {
		t.Fatalf("O-1: %+v", o1)
	}
}
