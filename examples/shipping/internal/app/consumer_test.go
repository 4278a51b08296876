package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/adapters"
	"github.com/reliable-orders/fulfillment/examples/shipping/internal/app"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// These tests run the apply function behind the real version guard on a
// database of its own, without a broker: how a team tests its rules'
// storage before run_test.go tests the whole service.

const consumerName = "shipping-service"

type fixture struct {
	db    *sqlx.DB
	repo  *adapters.Repository
	guard *versionguard.Guard
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema(),
		postgres.MigrationSet{Name: "shipping", FS: os.DirFS("../../migrations")})
	fp := consumertest.FailPoints(t, app.FailPoint)
	repo := adapters.NewRepository(db)
	c := app.NewConsumer(repo, fp)
	return fixture{db: db, repo: repo, guard: versionguard.NewBatch(consumerName, c.Transitions(), c.Apply)}
}

// handle runs envs through the guard in one unit of work, as the kit's
// batch processor does with the events of many partitions.
func (f fixture) handle(t *testing.T, envs ...event.Envelope) ([]versionguard.Outcome, error) {
	t.Helper()
	var out []versionguard.Outcome
	err := versionguard.InUnitOfWork(context.Background(), f.db, func(uow *versionguard.UnitOfWork) error {
		var err error
		out, err = f.guard.HandleBatch(context.Background(), uow, envs)
		return err
	})
	return out, err
}

// shipment is the order's shipment as "STATUS [items]", or the error.
func (f fixture) shipment(orderID string) string {
	s, err := f.repo.Shipment(context.Background(), orderID)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s %v", s.Status, s.ToShip)
}

// TestApplyBatch hands the guard the events of several orders at once:
// distinct orders go to Apply together, an order's refund that arrives
// before its payment is parked and applied after it in the same
// transaction, and a v1 refund returns every item.
func TestApplyBatch(t *testing.T) {
	f := newFixture(t)
	a, b := event.Item{SKU: "A", Quantity: 2}, event.Item{SKU: "B", Quantity: 1}
	outcomes, err := f.handle(t,
		consumertest.OrderPaid(t, "O-1", "80.00", a, b),
		consumertest.OrderPaid(t, "O-2", "80.00", b),
		consumertest.OrderRefundedV1(t, "O-3", "80.00", a),
		consumertest.OrderPaid(t, "O-3", "80.00", a),
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []versionguard.Outcome{versionguard.Applied, versionguard.Applied, versionguard.WaitingForGap, versionguard.Applied}
	if !slices.Equal(outcomes, want) {
		t.Fatalf("outcomes = %v, want %v", outcomes, want)
	}
	for id, want := range map[string]string{"O-1": "TO_SHIP [{A 2} {B 1}]", "O-2": "TO_SHIP [{B 1}]", "O-3": "CANCELLED []"} {
		if got := f.shipment(id); got != want {
			t.Errorf("shipment of %s = %s, want %s", id, got, want)
		}
	}
	if got := f.shipment("O-none"); got != "shipment not found: order O-none" {
		t.Errorf("shipment of an order never paid: %s", got)
	}
}

// TestRuleBreakingLinesArePermanent: lines that break the contract's rules
// fail the same way on every delivery, so they are dead-lettered at once
// rather than retried. Parse refuses them first; this is the consumer's
// own line of defence, reached here by skipping Parse.
func TestRuleBreakingLinesArePermanent(t *testing.T) {
	f := newFixture(t)
	env := consumertest.OrderPaid(t, "O-bad", "80.00", event.Item{SKU: "A", Quantity: 1})
	env.Data = json.RawMessage(`{"paymentId":"P-1","paidAmount":"80.00","currency":"CNY","customerId":"C-1","items":[{"sku":"A","quantity":0}]}`)
	_, err := f.handle(t, env)
	if class, reason := consumer.Classify(err); class != consumer.Permanent || reason != "INVALID_ITEMS" {
		t.Fatalf("error %v classified %s %s, want PERMANENT INVALID_ITEMS", err, class, reason)
	}
	if got := f.shipment("O-bad"); got != "shipment not found: order O-bad" {
		t.Fatalf("shipment = %s, want none: the transaction rolled back", got)
	}
}
