package ports_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/points/internal/app"
	"github.com/reliable-orders/fulfillment/services/points/internal/ports"
)

const consumerName = "points-service"

type fixture struct {
	*consumertest.Fixture
	repo *adapters.Repository
}

// setup serves the points API with its admin group wired as run.go
// wires it, behind an admin token, over a database with the service's
// tables; its Proc applies events as the consumer does.
func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	f.Fixture = consumertest.Serve(t, consumertest.Wiring{Consumer: consumerName, FailPoint: app.FailPoint,
		Migrations: []postgres.MigrationSet{{Name: "points", FS: os.DirFS("../../migrations")}},
		Wire: func(p consumertest.Parts) service.Events {
			repo := adapters.NewRepository(p.DB, consumerName)
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
	paid := func(orderID string) event.Envelope {
		return consumertest.OrderPaid(t, orderID, "80.50", consumertest.Item("SKU-1", 1))
	}
	refunded := func(orderID string, version int64, amount, total string) event.Envelope {
		return consumertest.OrderRefunded(t, orderID, version, amount, total, nil, nil)
	}
	earn := paid("O-1")
	first := refunded("O-1", 5, "0.60", "0.60") // worth floor(79.90) = 79: reverses 1
	second := refunded("O-1", 7, "10.00", "10.60")
	f.Process(earn, versionguard.Applied)
	f.Process(first, versionguard.Applied)
	f.Process(second, versionguard.Applied)
	gap := refunded("O-3", 5, "1.00", "1.00")
	f.Process(gap, versionguard.WaitingForGap)
	replayed := f.DeadLetter(gap) // an earlier dead letter of the same event, replayed
	if _, err := f.Dead.Replay(context.Background(), replayed, "test",
		func(context.Context, string, []byte, []byte, map[string]string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	deadID := f.DeadLetter(gap) // and dead-lettered again

	code, raw := f.Call(`{"orderIds":["O-404","O-1","O-3"]}`, consumertest.AdminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	entry := func(env event.Envelope, typ string, points float64, amount string) map[string]any {
		return map[string]any{"eventId": env.EventID, "type": typ, "points": points, "amount": amount,
			"createdAt": f.Stamp(`SELECT created_at FROM points_ledger WHERE event_id = $1`, env.EventID)}
	}
	none := map[string]any{"version": 0.0, "state": "NONE"}
	want := map[string]any{"orders": []any{
		map[string]any{"orderId": "O-404", "entries": []any{}, "consumer": none, "deadLetters": []any{}},
		map[string]any{"orderId": "O-1",
			"entries":  []any{entry(earn, "EARN", 80, "80.50"), entry(first, "REVERSAL", -1, "0.60"), entry(second, "REVERSAL", -10, "10.00")},
			"consumer": map[string]any{"version": 7.0, "state": "PARTIALLY_REVERSED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-3", "entries": []any{}, "consumer": none,
			"deadLetters": []any{map[string]any{"id": float64(deadID), "eventId": gap.EventID,
				"eventType": "OrderRefunded", "errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.Stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, deadID), "replayedBefore": true}}},
	}}
	var got any
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("views\n got %s\nwant %v", raw, want)
	}
	// points is a JSON integer, whatever its size.
	if !strings.Contains(raw, `"points":80,`) {
		t.Fatalf("points not an integer: %s", raw)
	}
	f.Process(consumertest.OrderPaid(t, "O-big", "9999999999999999.99", consumertest.Item("SKU-1", 1)), versionguard.Applied)
	if code, raw := f.Call(`{"orderIds":["O-big"]}`, consumertest.AdminToken); code != 200 || !strings.Contains(raw, `"points":9999999999999999,"amount":"9999999999999999.99"`) {
		t.Fatalf("the largest order: %d %s", code, raw)
	}
	// The orders the service holds effects for, a page at a time.
	f.ExpectEffects("O-1", "O-big")
	// An order counts once all its entries are older than before: O-1's
	// last entry written after it leaves O-1 out, its first ones alone do
	// not bring it back.
	if _, err := f.DB.Exec(`UPDATE points_ledger SET created_at = '2999-06-01' WHERE event_id = $1`, second.EventID); err != nil {
		t.Fatal(err)
	}
	f.ExpectEffectsBefore("2999-01-01T00:00:00Z", "O-big")
	f.ExpectEffectsBefore("2999-07-01T00:00:00Z", "O-1", "O-big")
}

func TestReconciliationRefusesBadRequests(t *testing.T) {
	setup(t).ExpectRefusals()
}
