package ports_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/ports"
)

const consumerName = "inventory-service"

type fixture struct {
	*consumertest.Fixture
	repo *adapters.Repository
}

// setup serves the inventory API with its admin group wired as run.go
// wires it, behind an admin token, over a database with the service's
// tables; its Proc applies events as the consumer does.
func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	f.Fixture = consumertest.Serve(t, consumertest.Wiring{Consumer: consumerName, FailPoint: app.FailPoint, MapError: ports.MapError,
		Migrations: []postgres.MigrationSet{outbox.Schema(), {Name: "inventory", FS: os.DirFS("../../migrations")}},
		Wire: func(p consumertest.Parts) service.Events {
			repo := adapters.NewRepository(p.DB, nil)
			f.repo = repo
			ports.Register(p.HTTP.Echo, repo)
			ports.RegisterReconciliation(p.Admin, repo, p.Facts)
			c := app.NewConsumer(repo, p.FailPoints, p.Logger)
			return service.Events{Transitions: c.Transitions(), ApplyBatch: c.Apply}
		}})
	return f
}

func TestReconciliationViews(t *testing.T) {
	f := setup(t)
	for sku, n := range map[string]int{"SKU-1": 10, "SKU-2": 5} {
		if _, err := f.repo.SetAvailable(context.Background(), sku, n); err != nil {
			t.Fatal(err)
		}
	}
	items := consumertest.Items(consumertest.Item("SKU-1", 2), consumertest.Item("SKU-2", 1))
	back := consumertest.Items(consumertest.Item("SKU-1", 1))
	paid := func(orderID string, items ...event.Item) event.Envelope {
		return consumertest.OrderPaid(t, orderID, "80.00", items...)
	}
	refunded := func(orderID string) event.Envelope {
		return consumertest.OrderRefunded(t, orderID, 5, "40.00", "40.00", back, back)
	}
	f.Process(paid("O-1", items...), versionguard.Applied)
	f.Process(refunded("O-1"), versionguard.Applied)
	f.Process(paid("O-2", consumertest.Item("NO-SUCH-SKU", 1)), versionguard.Applied)
	gap := refunded("O-3")
	f.Process(gap, versionguard.WaitingForGap)
	deadID := f.DeadLetter(gap)

	code, raw := f.Call(`{"orderIds":["O-1","O-404","O-2","O-3"]}`, consumertest.AdminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	none := map[string]any{"version": 0.0, "state": "NONE"}
	want := map[string]any{"orders": []any{
		map[string]any{"orderId": "O-1", "status": "PARTIALLY_RESTOCKED", "reason": "",
			"items":     []any{map[string]any{"sku": "SKU-1", "quantity": 2.0}, map[string]any{"sku": "SKU-2", "quantity": 1.0}},
			"restocked": []any{map[string]any{"sku": "SKU-1", "quantity": 1.0}},
			"updatedAt": f.Stamp(`SELECT updated_at FROM inventory_orders WHERE order_id = 'O-1'`),
			"consumer":  map[string]any{"version": 5.0, "state": "PARTIALLY_RESTOCKED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-404", "status": "NONE", "reason": "", "items": []any{}, "restocked": []any{},
			"consumer": none, "deadLetters": []any{}},
		map[string]any{"orderId": "O-2", "status": "REJECTED", "reason": "INSUFFICIENT_STOCK",
			"items": []any{map[string]any{"sku": "NO-SUCH-SKU", "quantity": 1.0}}, "restocked": []any{},
			"updatedAt": f.Stamp(`SELECT updated_at FROM inventory_orders WHERE order_id = 'O-2'`),
			"consumer":  map[string]any{"version": 3.0, "state": "REJECTED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-3", "status": "NONE", "reason": "", "items": []any{}, "restocked": []any{},
			"consumer": none, "deadLetters": []any{map[string]any{"id": float64(deadID), "eventId": gap.EventID,
				"eventType": "OrderRefunded", "errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.Stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, deadID), "replayedBefore": false}}},
	}}
	var got any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", raw, want)
	}
	// The orders the service holds effects for, a page at a time.
	f.ExpectEffects("O-1", "O-2")
}

func TestReconciliationRefusesBadRequests(t *testing.T) {
	setup(t).ExpectRefusals()
}
