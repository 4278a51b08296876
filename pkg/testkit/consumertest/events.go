package consumertest

import (
	"fmt"
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

// OrderPaid is the OrderPaid of orderID at version 3: PaidData of customer C-1
// paying amount for items.
func OrderPaid(t testing.TB, orderID, amount string, items ...event.Item) event.Envelope {
	t.Helper()
	return Event(t, event.OrderPaid, orderID, 3, PaidData("C-1", amount, items...))
}

// OrderRefunded is the OrderRefunded of orderID at version: refund R-<version>
// of payment P-1 giving back amount in CNY to customer C-1, total what the
// order's refunds have given back with it, and returned the goods it gives
// back, totalReturned those the order's refunds have given back with it.
func OrderRefunded(t testing.TB, orderID string, version int64, amount, total string, returned, totalReturned []event.Item) event.Envelope {
	t.Helper()
	return Event(t, event.OrderRefunded, orderID, version, event.OrderRefundedData{RefundID: fmt.Sprintf("R-%d", version),
		PaymentID: "P-1", RefundedAmount: Money(amount), TotalRefundedAmount: Money(total), Currency: "CNY", CustomerID: "C-1",
		Items: Items(returned...), TotalReturnedItems: Items(totalReturned...)})
}

// OrderRefundedV1 is the OrderRefunded of orderID at version 5 in eventVersion
// 1, from before partial refunds: the order's one refund (R-1 of payment
// P-1, amount in CNY to customer C-1), which gave back every item.
func OrderRefundedV1(t testing.TB, orderID, amount string, items ...event.Item) event.Envelope {
	t.Helper()
	return EventV(t, event.OrderRefunded, orderID, 5, 1, event.OrderRefundedV1Data{RefundID: "R-1", PaymentID: "P-1",
		RefundedAmount: Money(amount), Currency: "CNY", CustomerID: "C-1", Items: Items(items...)})
}

// OrderRefundRequested is the OrderRefundRequested of orderID at version:
// refund refundID of payment paymentID, asking amount in CNY back.
func OrderRefundRequested(t testing.TB, orderID string, version int64, refundID, paymentID, amount string) event.Envelope {
	t.Helper()
	return Event(t, event.OrderRefundRequested, orderID, version, event.OrderRefundRequestedData{RefundID: refundID,
		PaymentID: paymentID, Amount: Money(amount), Currency: "CNY"})
}

// OrderPaymentRejected is the OrderPaymentRejected of orderID at version:
// payment paymentID of amount in CNY by customer C-1 reached the order once
// it was cancelled (ORDER_CANCELLED), and goes back whole as refund
// refundID.
func OrderPaymentRejected(t testing.TB, orderID string, version int64, paymentID, refundID, amount string) event.Envelope {
	t.Helper()
	return Event(t, event.OrderPaymentRejected, orderID, version, event.OrderPaymentRejectedData{PaymentID: paymentID,
		RefundID: refundID, Amount: Money(amount), Currency: "CNY", CustomerID: "C-1", Reason: "ORDER_CANCELLED"})
}

// Sample is an event of typ about orderID at version with the data of a
// typical order: customer C-1, one SKU-1 for 80.00 CNY paid with payment
// P-1, refunded in full with refund R-1, a refund of 500.00 declined, a
// payment that reached it once cancelled returned.
func Sample(t testing.TB, typ event.Type, orderID string, version int64) event.Envelope {
	t.Helper()
	paid, one := Money("80.00"), Items(Item("SKU-1", 1))
	var data any
	switch typ {
	case event.OrderCreated:
		data = event.OrderCreatedData{CustomerID: "C-1", Currency: "CNY", Amount: paid,
			Items: []event.PricedItem{{SKU: "SKU-1", Quantity: 1, UnitPrice: paid}}}
	case event.OrderCheckedOut:
		data = event.OrderCheckedOutData{CustomerID: "C-1", Currency: "CNY", Amount: paid}
	case event.OrderRefundRequested:
		data = event.OrderRefundRequestedData{RefundID: "R-1", PaymentID: "P-1", Amount: paid, Currency: "CNY"}
	case event.OrderPaid:
		data = PaidData("C-1", "80.00", one...)
	case event.OrderRefunded:
		data = RefundedData("C-1", "80.00", one, one)
	case event.OrderRefundRejected:
		data = event.OrderRefundRejectedData{RefundID: "R-0", Amount: Money("500.00"), Currency: "CNY", CustomerID: "C-1",
			Reason: "REFUND_EXCEEDS_PAYMENT"}
	case event.OrderCancelled:
		data = event.OrderCancelledData{CustomerID: "C-1", Reason: "changed my mind"}
	case event.OrderPaymentRejected:
		data = event.OrderPaymentRejectedData{PaymentID: "P-1", RefundID: "R-9", Amount: paid, Currency: "CNY",
			CustomerID: "C-1", Reason: "ORDER_CANCELLED"}
	case event.OrderPaymentReturned:
		data = event.OrderPaymentReturnedData{PaymentID: "P-1", RefundID: "R-9", Amount: paid, Currency: "CNY", CustomerID: "C-1"}
	default:
		t.Fatalf("no sample of %s", typ)
	}
	return Event(t, typ, orderID, version, data)
}
