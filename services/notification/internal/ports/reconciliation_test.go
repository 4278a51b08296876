package ports_test

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/notification/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/notification/internal/app"
	"github.com/reliable-orders/fulfillment/services/notification/internal/ports"
)

const consumerName = "notification-service"

type fixture struct {
	*consumertest.Fixture
	repo *adapters.Repository
}

// setup serves the notification API with its admin group wired as run.go
// wires it, behind an admin token, over a database with the service's
// tables; its Proc applies events as the consumer does.
func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	f.Fixture = consumertest.Serve(t, consumertest.Wiring{Consumer: consumerName, FailPoint: app.FailPoint,
		Migrations: []postgres.MigrationSet{{Name: "notification", FS: os.DirFS("../../migrations")}},
		Wire: func(p consumertest.Parts) service.Events {
			repo := adapters.NewRepository(p.DB)
			f.repo = repo
			ports.Register(p.HTTP.Echo, repo)
			ports.RegisterReconciliation(p.Admin, repo, p.Facts)
			c := app.NewConsumer(app.DBSink(repo, p.Logger), p.FailPoints, p.Logger)
			return service.Events{Transitions: c.Transitions(), ApplyBatch: c.Apply, LateFacts: c.LateFacts()}
		}})
	return f
}

func TestReconciliationViews(t *testing.T) {
	f := setup(t)
	paid := consumertest.Sample(t, event.OrderPaid, "O-1", 3)
	rejected := consumertest.Sample(t, event.OrderRefundRejected, "O-1", 5)
	refunded := consumertest.Sample(t, event.OrderRefunded, "O-1", 7)
	returned := consumertest.Sample(t, event.OrderPaymentReturned, "O-2", 4)
	for _, env := range []event.Envelope{paid, rejected, refunded, returned} {
		f.Process(env, versionguard.Applied)
	}
	gap := consumertest.OrderRefunded(t, "O-3", 5, "1.00", "1.00", nil, nil)
	f.Process(gap, versionguard.WaitingForGap)
	deadID := f.DeadLetter(gap)

	code, raw := f.Call(`{"orderIds":["O-1","O-2","O-3","O-404"]}`, consumertest.AdminToken)
	if code != 200 {
		t.Fatalf("%d %s", code, raw)
	}
	sent := func(env event.Envelope, kind string) map[string]any {
		return map[string]any{"eventId": env.EventID, "kind": kind,
			"createdAt": f.Stamp(`SELECT created_at FROM notifications WHERE event_id = $1`, env.EventID)}
	}
	none := map[string]any{"version": 0.0, "state": "NONE"}
	want := map[string]any{"orders": []any{
		map[string]any{"orderId": "O-1",
			"notifications": []any{sent(paid, "ORDER_PAID"), sent(rejected, "REFUND_REJECTED"), sent(refunded, "ORDER_REFUNDED")},
			"consumer":      map[string]any{"version": 7.0, "state": "REFUNDED_NOTIFIED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-2", "notifications": []any{sent(returned, "PAYMENT_RETURNED")},
			"consumer": map[string]any{"version": 4.0, "state": "RETURN_NOTIFIED"}, "deadLetters": []any{}},
		map[string]any{"orderId": "O-3", "notifications": []any{}, "consumer": none,
			"deadLetters": []any{map[string]any{"id": float64(deadID), "eventId": gap.EventID,
				"eventType": "OrderRefunded", "errorClass": "PERMANENT", "failureReason": "WAITING_FOR_GAP: versions 3-4 missing",
				"deadLetteredAt": f.Stamp(`SELECT dead_lettered_at FROM dead_letters WHERE id = $1`, deadID), "replayedBefore": false}}},
		map[string]any{"orderId": "O-404", "notifications": []any{}, "consumer": none, "deadLetters": []any{}},
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
	// An order counts once all its notifications are older than before:
	// O-1's last one written after it leaves O-1 out.
	if _, err := f.DB.Exec(`UPDATE notifications SET created_at = '2999-06-01' WHERE event_id = $1`, refunded.EventID); err != nil {
		t.Fatal(err)
	}
	f.ExpectEffectsBefore("2999-01-01T00:00:00Z", "O-2")
	f.ExpectEffectsBefore("2999-07-01T00:00:00Z", "O-1", "O-2")
}

func TestReconciliationRefusesBadRequests(t *testing.T) {
	setup(t).ExpectRefusals()
}
