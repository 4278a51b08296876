package main

import (
	"fmt"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/points/internal/app"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
)

// adapter is how the conformance suite reads what the
// service did for an order: the order's ledger, its customer's balance and the
// version guard's position.
type adapter struct{}

func (adapter) Effect(s *servicetest.Service, o consumertest.Order) string {
	l := ledger(s, o.ID)
	pos := consumertest.Position(s, o.ID)
	return fmt.Sprintf("%s %v (%d); balance %d; at v%d %s", l.Status, entries(l), l.Count, balance(s, o.Customer), pos.Version, pos.State)
}

func (adapter) Want(_ consumertest.Order, stage consumertest.Stage) string {
	switch stage {
	case consumertest.Paid:
		return "EARNED [EARN 80 80.00] (1); balance 80; at v3 EARNED"
	case consumertest.Refunded:
		return "REVERSED [EARN 80 80.00 REVERSAL -80 80.00] (2); balance 0; at v5 REVERSED"
	}
	return "NONE [] (0); balance 0; at v0 NONE"
}

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Features{Consumer: "points-service", FailPoint: app.FailPoint, App: "internal/app"}, run, adapter{})
}

func ledger(s *servicetest.Service, orderID string) pointsapi.OrderResponse {
	s.T().Helper()
	var out pointsapi.OrderResponse
	s.GetJSON("/points/orders/"+orderID, &out)
	return out
}

// entries lists a ledger as "TYPE points amount", in order.
func entries(l pointsapi.OrderResponse) []string {
	out := make([]string, len(l.Entries))
	for i, e := range l.Entries {
		out[i] = fmt.Sprintf("%s %d %s", e.Type, e.Points, e.Amount)
	}
	return out
}

func balance(s *servicetest.Service, customerID string) int64 {
	s.T().Helper()
	var out pointsapi.BalanceResponse
	s.GetJSON("/points/customers/"+customerID, &out)
	return out.Balance
}

func TestService(t *testing.T) {
	s := servicetest.Start(t, run, nil)
	lines := consumertest.Items(consumertest.Item("SKU-1", 2))

	t.Run("a refund of more than was paid reverses what was earned, no more, without retry or DLQ", func(t *testing.T) {
		s.Bind(t)
		s.Publish(
			consumertest.Event(t, event.OrderPaid, "O-neg", 3, consumertest.PaidData("C-neg", "10.00", lines...)),
			consumertest.Event(t, event.OrderRefunded, "O-neg", 5, consumertest.RefundedData("C-neg", "20.00", lines, lines)),
		)
		s.Drained("points-service")

		l := ledger(s, "O-neg")
		if got, want := fmt.Sprintf("%s %v", l.Status, entries(l)), "REVERSED [EARN 10 10.00 REVERSAL -10 20.00]"; got != want {
			t.Fatalf("ledger = %s, want %s", got, want)
		}
		if b := balance(s, "C-neg"); b != 0 {
			t.Fatalf("customer balance = %d, want 0", b)
		}
		if n := s.DeadLetters("O-neg").Count; n != 0 {
			t.Fatalf("dead letters = %d, want 0", n)
		}
	})

	t.Run("a partial refund reverses the points of what it gave back", func(t *testing.T) {
		s.Bind(t)
		s.Publish(
			consumertest.Event(t, event.OrderPaid, "O-part", 3, consumertest.PaidData("C-part", "80.00", lines...)),
			consumertest.Event(t, event.OrderRefunded, "O-part", 5, consumertest.RefundedData("C-part", "30.50", lines, lines)),
		)
		s.Drained("points-service")

		// 80.00 − 30.50 leaves 49.50 paid: worth 49 points.
		l := ledger(s, "O-part")
		if got, want := fmt.Sprintf("%s %v", l.Status, entries(l)), "PARTIALLY_REVERSED [EARN 80 80.00 REVERSAL -31 30.50]"; got != want {
			t.Fatalf("ledger = %s, want %s", got, want)
		}
		if b := balance(s, "C-part"); b != 49 {
			t.Fatalf("customer balance = %d, want 49", b)
		}
	})

	t.Run("an unknown order and customer read as empty", func(t *testing.T) {
		s.Bind(t)
		if out := ledger(s, "O-unknown"); out.Status != "NONE" || out.Count != 0 || out.Entries == nil {
			t.Fatalf("unknown order = %+v, want NONE with an empty list", out)
		}
		if b := balance(s, "C-unknown"); b != 0 {
			t.Fatalf("unknown customer balance = %d, want 0", b)
		}
	})
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
