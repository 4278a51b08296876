package adapters_test

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// TestEnvelopeOfEveryEvent checks that each domain event becomes a
// schema-valid envelope carrying the order's facts.
func TestEnvelopeOfEveryEvent(t *testing.T) {
	t.Parallel()
	paid := func(t *testing.T) *order.Order {
		o := newOrder(t, "O-1")
		o.Status, o.Version, o.PaymentID = order.StatusPaid, 3, "P-1"
		return o
	}
	// refunded has had one unit of SKU-1 returned for 40.00, then 0.01
	// back without goods.
	refunded := func(t *testing.T) *order.Order {
		o := paid(t)
		o.Status, o.Version = order.StatusPartiallyRefunded, 7
		o.Refunds = []order.Refund{
			{ID: "R-1", Kind: order.KindRefund, PaymentID: "P-1", Amount: dec("40"), Currency: "CNY",
				Items: []order.Line{{SKU: "SKU-1", Quantity: 1}}, Status: order.RefundSucceeded},
			{ID: "R-2", Kind: order.KindRefund, PaymentID: "P-1", Amount: dec("0.01"), Currency: "CNY", Status: order.RefundSucceeded},
		}
		return o
	}
	cancelled := func(t *testing.T) *order.Order {
		o := newOrder(t, "O-1")
		o.Status, o.Version = order.StatusCancelled, 2
		return o
	}
	tests := []struct {
		name  string
		order func(*testing.T) *order.Order
		event order.Event
		check func(t *testing.T, env event.Envelope)
	}{
		{"created", func(t *testing.T) *order.Order { return newOrder(t, "O-1") }, order.Event{Type: order.EventCreated, Version: 1},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderCreatedData
				decode(t, env, &d)
				if d.CustomerID != "C-1" || d.Amount.String() != "80.50" || len(d.Items) != 2 {
					t.Fatalf("%+v", d)
				}
			}},
		{"checked out", func(t *testing.T) *order.Order { return newOrder(t, "O-1") }, order.Event{Type: order.EventCheckedOut, Version: 2},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderCheckedOutData
				decode(t, env, &d)
				if d.Currency != "CNY" || d.Amount.String() != "80.50" {
					t.Fatalf("%+v", d)
				}
			}},
		{"paid", paid, order.Event{Type: order.EventPaid, Version: 3},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderPaidData
				decode(t, env, &d)
				if d.PaymentID != "P-1" || d.PaidAmount.String() != "80.50" || len(d.Items) != 2 || d.Items[0] != (event.Item{SKU: "SKU-1", Quantity: 2}) {
					t.Fatalf("%+v", d)
				}
			}},
		{"refund requested", paid, order.Event{Type: order.EventRefundRequested, Version: 4, RefundID: "R-1", Amount: dec("30")},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderRefundRequestedData
				decode(t, env, &d)
				if d.RefundID != "R-1" || d.PaymentID != "P-1" || d.Amount.String() != "30.00" {
					t.Fatalf("%+v", d)
				}
			}},
		{"refunded", refunded, order.Event{Type: order.EventRefunded, Version: 7, RefundID: "R-2", Amount: dec("0.01")},
			func(t *testing.T, env event.Envelope) {
				d, err := env.RefundedData()
				if err != nil {
					t.Fatal(err)
				}
				if env.EventVersion != 3 || d.RefundID != "R-2" || d.RefundedAmount.String() != "0.01" || d.TotalRefundedAmount.String() != "40.01" ||
					len(d.Items) != 0 || len(d.TotalReturnedItems) != 1 || d.TotalReturnedItems[0] != (event.Item{SKU: "SKU-1", Quantity: 1}) || d.CustomerID != "C-1" {
					t.Fatalf("v%d %+v", env.EventVersion, d)
				}
			}},
		{"payment rejected", cancelled, order.Event{Type: order.EventPaymentRejected, Version: 3, RefundID: "R-9", PaymentID: "P-9",
			Amount: dec("80.50"), Currency: "CNY", Reason: order.ReasonOrderCancelled},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderPaymentRejectedData
				decode(t, env, &d)
				if d.PaymentID != "P-9" || d.RefundID != "R-9" || d.Amount.String() != "80.50" || d.Reason != "ORDER_CANCELLED" || d.CustomerID != "C-1" {
					t.Fatalf("%+v", d)
				}
			}},
		{"payment returned", cancelled, order.Event{Type: order.EventPaymentReturned, Version: 4, RefundID: "R-9", PaymentID: "P-9",
			Amount: dec("80.50"), Currency: "CNY"},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderPaymentReturnedData
				decode(t, env, &d)
				if d.PaymentID != "P-9" || d.RefundID != "R-9" || d.Amount.String() != "80.50" || d.Currency != "CNY" {
					t.Fatalf("%+v", d)
				}
			}},
		{"refund rejected", paid, order.Event{Type: order.EventRefundRejected, Version: 5, RefundID: "R-1", Amount: dec("300"), Reason: "REFUND_EXCEEDS_PAYMENT"},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderRefundRejectedData
				decode(t, env, &d)
				if d.Reason != "REFUND_EXCEEDS_PAYMENT" || d.Amount.String() != "300.00" {
					t.Fatalf("%+v", d)
				}
			}},
		{"cancelled", func(t *testing.T) *order.Order { return newOrder(t, "O-1") }, order.Event{Type: order.EventCancelled, Version: 2, Reason: "changed my mind"},
			func(t *testing.T, env event.Envelope) {
				var d event.OrderCancelledData
				decode(t, env, &d)
				if d.Reason != "changed my mind" || d.CustomerID != "C-1" {
					t.Fatalf("%+v", d)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := adapters.Envelope(tt.order(t), tt.event, "4bf92f3577b34da6a3ce929d0e0e4736")
			if err != nil {
				t.Fatal(err)
			}
			raw, err := env.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := event.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if string(parsed.EventType) != string(tt.event.Type) || parsed.AggregateVersion != tt.event.Version ||
				parsed.AggregateID != "O-1" || parsed.Producer != "order-service" || parsed.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Fatalf("envelope %+v", parsed)
			}
			tt.check(t, parsed)
		})
	}
}

func decode(t *testing.T, env event.Envelope, v any) {
	t.Helper()
	if err := env.DecodeData(v); err != nil {
		t.Fatal(err)
	}
}
