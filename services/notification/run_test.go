package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/notification/internal/app"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
)

// adapter is how the conformance suite reads what the
// service did for an order: the order's notifications and the version guard's
// position.
type adapter struct{}

func (adapter) Effect(s *servicetest.Service, o consumertest.Order) string {
	out := list(s, o.ID)
	sent := make([]string, len(out.Items))
	for i, it := range out.Items {
		sent[i] = fmt.Sprintf("%s %s %t", it.Kind, it.Channel, strings.Contains(it.Body, consumertest.PaidAmount+" CNY"))
	}
	pos := consumertest.Position(s, o.ID)
	return fmt.Sprintf("%v (%d); at v%d %s", sent, out.Count, pos.Version, pos.State)
}

// Want: each notification tells the customer the order's amount.
func (adapter) Want(_ consumertest.Order, stage consumertest.Stage) string {
	switch stage {
	case consumertest.Paid:
		return "[ORDER_PAID IN_APP true] (1); at v3 PAID_NOTIFIED"
	case consumertest.Refunded:
		return "[ORDER_PAID IN_APP true ORDER_REFUNDED IN_APP true] (2); at v5 REFUNDED_NOTIFIED"
	}
	return "[] (0); at v0 NONE"
}

func TestConformance(t *testing.T) {
	consumertest.Run(t, consumertest.Features{Consumer: "notification-service", FailPoint: app.FailPoint, App: "internal/app"}, run, adapter{})
}

func list(s *servicetest.Service, orderID string) notificationapi.ListResponse {
	s.T().Helper()
	var out notificationapi.ListResponse
	s.GetJSON("/notifications?orderId="+orderID, &out)
	return out
}

// kinds lists an order's notifications by kind, in order.
func kinds(s *servicetest.Service, orderID string) []string {
	s.T().Helper()
	out := list(s, orderID)
	kinds := make([]string, len(out.Items))
	for i, it := range out.Items {
		kinds[i] = it.Kind
	}
	return kinds
}

func TestService(t *testing.T) {
	s := servicetest.Start(t, run, nil)

	t.Run("a declined refund is told and a later refund still is", func(t *testing.T) {
		s.Bind(t)
		lines := consumertest.Items(consumertest.Item("SKU-1", 2))
		s.Publish(
			consumertest.Event(t, event.OrderPaid, "O-declined", 3, consumertest.PaidData("C-1", "80.00", lines...)),
			consumertest.Event(t, event.OrderRefundRejected, "O-declined", 5, event.OrderRefundRejectedData{RefundID: "R-0",
				Amount: consumertest.Money("500.00"), Currency: "CNY", CustomerID: "C-1", Reason: "REFUND_EXCEEDS_PAYMENT"}),
			consumertest.Event(t, event.OrderRefunded, "O-declined", 7, consumertest.RefundedData("C-1", "80.00", lines, lines)),
		)
		s.Drained("notification-service")

		if got, want := kinds(s, "O-declined"), []string{"ORDER_PAID", "REFUND_REJECTED", "ORDER_REFUNDED"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("notifications = %v, want %v", got, want)
		}
	})

	t.Run("orderId is required", func(t *testing.T) {
		s.Bind(t)
		if code, _ := s.Do(http.MethodGet, "/notifications", ""); code != http.StatusBadRequest {
			t.Fatalf("GET /notifications = %d, want 400", code)
		}
		if out := list(s, "O-unknown"); out.Count != 0 || out.Items == nil {
			t.Fatalf("unknown order = %+v, want an empty list", out)
		}
	})
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, nil).CheckOpenAPI("openapi.json")
}
