package adapters

import (
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// Envelope turns a domain event into the envelope of the order-events
// contract: aggregateVersion is the order's version after the change, and
// the payload (pkg/event/payload.go) is filled from the order as it stands
// after the change. traceID continues the request's trace; empty starts one.
func Envelope(o *order.Order, e order.Event, traceID string) (event.Envelope, error) {
	var data any
	switch e.Type {
	case order.EventCreated:
		items := make([]event.PricedItem, len(o.Items))
		for i, it := range o.Items {
			items[i] = event.PricedItem{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: event.NewMoney(it.UnitPrice)}
		}
		data = event.OrderCreatedData{CustomerID: o.CustomerID, Currency: o.Currency, Amount: event.NewMoney(o.Amount), Items: items}
	case order.EventCheckedOut:
		data = event.OrderCheckedOutData{CustomerID: o.CustomerID, Currency: o.Currency, Amount: event.NewMoney(o.Amount)}
	case order.EventPaid:
		data = event.OrderPaidData{PaymentID: o.PaymentID, PaidAmount: event.NewMoney(o.Amount), Currency: o.Currency,
			CustomerID: o.CustomerID, Items: eventItems(o)}
	case order.EventRefundRequested:
		data = event.OrderRefundRequestedData{RefundID: e.RefundID, PaymentID: o.PaymentID, Amount: event.NewMoney(e.Amount),
			Currency: o.Currency, Reason: e.Reason}
	case order.EventRefunded:
		data = event.OrderRefundedData{RefundID: e.RefundID, PaymentID: o.PaymentID, RefundedAmount: event.NewMoney(e.Amount),
			TotalRefundedAmount: event.NewMoney(o.RefundedAmount()), Currency: o.Currency, CustomerID: o.CustomerID,
			Items: lines(e.Items), TotalReturnedItems: lines(o.ReturnedItems()), Reason: e.Reason}
	case order.EventPaymentRejected:
		data = event.OrderPaymentRejectedData{PaymentID: e.PaymentID, RefundID: e.RefundID, Amount: event.NewMoney(e.Amount),
			Currency: e.Currency, CustomerID: o.CustomerID, Reason: e.Reason}
	case order.EventPaymentReturned:
		data = event.OrderPaymentReturnedData{PaymentID: e.PaymentID, RefundID: e.RefundID, Amount: event.NewMoney(e.Amount),
			Currency: e.Currency, CustomerID: o.CustomerID}
	case order.EventRefundRejected:
		data = event.OrderRefundRejectedData{RefundID: e.RefundID, Amount: event.NewMoney(e.Amount), Currency: o.Currency,
			CustomerID: o.CustomerID, Reason: e.Reason}
	case order.EventCancelled:
		data = event.OrderCancelledData{CustomerID: o.CustomerID, Reason: e.Reason}
	default:
		return event.Envelope{}, fmt.Errorf("no envelope for domain event %q", e.Type)
	}
	env, err := event.New(event.Type(e.Type), event.Meta{
		AggregateID:      o.ID,
		AggregateVersion: e.Version,
		Producer:         Producer,
		TraceID:          traceID,
	}, data)
	if err != nil {
		return event.Envelope{}, fmt.Errorf("envelope of %s for order %s: %w", e.Type, o.ID, err)
	}
	return env, nil
}

// lines turns goods into the contract's items; none is an empty list,
// never null.
func lines(ls []order.Line) []event.Item {
	out := make([]event.Item, len(ls))
	for i, l := range ls {
		out[i] = event.Item{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
}

func eventItems(o *order.Order) []event.Item {
	items := make([]event.Item, len(o.Items))
	for i, it := range o.Items {
		items[i] = event.Item{SKU: it.SKU, Quantity: it.Quantity}
	}
	return items
}
