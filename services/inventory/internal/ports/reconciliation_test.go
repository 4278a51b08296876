package ports_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
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
	db := consumertest.Database(t, outbox.Schema(), postgres.MigrationSet{Name: "inventory", FS: os.DirFS("../../migrations")})
	fp, err := failpoint.New(failpoint.Config{Names: []string{app.FailPoint}})
	if err != nil {
		t.Fatal(err)
	}
	repo := adapters.NewRepository(db, nil)
	c := app.NewConsumer(repo, fp, slog.New(slog.DiscardHandler))
	srv := httpapi.New(httpapi.Config{AdminToken: consumertest.AdminToken, MapError: ports.MapError}, slog.New(slog.DiscardHandler))
	ports.Register(srv.Echo, repo)
	ports.RegisterReconciliation(srv.Admin(), repo, admin.NewFactsReader(db, consumerName))
	guard := versionguard.NewBatch(consumerName, c.Transitions(), c.Apply)
	return &fixture{Fixture: consumertest.New(t, db, consumerName, srv.Echo, guard), repo: repo}
}

func TestReconciliationViews(t *testing.T) {
	f := setup(t)
	for sku, n := range map[string]int{"SKU-1": 10, "SKU-2": 5} {
		if _, err := f.repo.SetAvailable(context.Background(), sku, n); err != nil {
			t.Fatal(err)
		}
	}
	items := []event.Item{{SKU: "SKU-1", Quantity: 2}, {SKU: "SKU-2", Quantity: 1}}
	paid := func(orderID string, items []event.Item) event.Envelope {
		return f.Envelope(event.OrderPaid, orderID, 3, event.OrderPaidData{PaymentID: "P-1", PaidAmount: consumertest.Money("80.00"),
			Currency: "CNY", CustomerID: "C-1", Items: items})
	}
	refunded := func(orderID string) event.Envelope {
		back := []event.Item{{SKU: "SKU-1", Quantity: 1}}
		return f.Envelope(event.OrderRefunded, orderID, 5, event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1",
			RefundedAmount: consumertest.Money("40.00"), TotalRefundedAmount: consumertest.Money("40.00"), Currency: "CNY", CustomerID: "C-1",
			Items: back, TotalReturnedItems: back})
	}
	f.Process(paid("O-1", items), versionguard.Applied)
	f.Process(refunded("O-1"), versionguard.Applied)
	f.Process(paid("O-2", []event.Item{{SKU: "NO-SUCH-SKU", Quantity: 1}}), versionguard.Applied)
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
