package consumertest

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Event is an event of the order service about orderID at version, in the
// current version of its type, failing the test if it breaks the contract.
func Event(t testing.TB, typ event.Type, orderID string, version int64, data any) event.Envelope {
	t.Helper()
	return EventV(t, typ, orderID, version, 0, data)
}

// EventV is Event in eventVersion v of its type (0: the current one).
func EventV(t testing.TB, typ event.Type, orderID string, version int64, v int, data any) event.Envelope {
	t.Helper()
	env, err := event.New(typ, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "order-service", EventVersion: v}, data)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// Item is one order line.
func Item(sku string, qty int) event.Item { return event.Item{SKU: sku, Quantity: qty} }

// Items lists its, as [] (never null) when there are none.
func Items(its ...event.Item) []event.Item { return append([]event.Item{}, its...) }

// PaidData is the payment of an order: amount in CNY by customer, for
// items (payment P-1).
func PaidData(customer, amount string, items ...event.Item) event.OrderPaidData {
	return event.OrderPaidData{PaymentID: "P-1", PaidAmount: Money(amount), Currency: "CNY", CustomerID: customer, Items: Items(items...)}
}

// RefundedData is refund R-1 of payment P-1: amount in CNY to customer,
// the order's only refund so far (its running total is amount), giving
// back returned, with total the goods the order's refunds have given back.
func RefundedData(customer, amount string, returned, total []event.Item) event.OrderRefundedData {
	return event.OrderRefundedData{RefundID: "R-1", PaymentID: "P-1", RefundedAmount: Money(amount),
		TotalRefundedAmount: Money(amount), Currency: "CNY", CustomerID: customer, Items: Items(returned...),
		TotalReturnedItems: Items(total...)}
}
