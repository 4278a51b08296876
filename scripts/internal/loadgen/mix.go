package loadgen

import (
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Shape is what a mixed run (Config.Mix) does with one order.
type Shape int

// The shapes of a mixed run's orders.
const (
	// ShapePaid is an OrderPaid alone.
	ShapePaid Shape = iota
	// ShapeRefunded is an OrderPaid, then an OrderRefunded of the whole
	// order: the goods go back to stock, the points are reversed.
	ShapeRefunded
	// ShapeRefundRejected is an OrderPaid, then an OrderRefundRejected:
	// only the customer is told.
	ShapeRefundRejected
)

// RefundVersion is the aggregateVersion of a mixed run's OrderRefunded
// and OrderRefundRejected: after the OrderRefundRequested at version 4,
// which the load leaves out, since payment, its consumer, would try to
// refund a payment it never took. The consumers apply an event that skips
// a version when their state allows it.
const RefundVersion = 5

// ShapeOf is the shape of order i (1-based) of a mixed run: three in ten
// are refunded, one in ten has its refund rejected, the rest are only paid.
func ShapeOf(i int) Shape {
	switch i % 10 {
	case 0, 4, 8:
		return ShapeRefunded
	case 6:
		return ShapeRefundRejected
	}
	return ShapePaid
}

// Reversed reports whether the events of order i are published newest
// first, so that its refund reaches the consumers before its payment and
// the version guard parks it until the payment arrives.
func Reversed(i int) bool { return i%4 == 0 && ShapeOf(i) != ShapePaid }

// RefundEventID is the eventId of the refund event of order i.
func RefundEventID(runID string, i int) string {
	return fmt.Sprintf("%s-%d", EventID(runID, i), RefundVersion)
}

// RefundID is the refundId of order i's refund.
func RefundID(runID string, i int) string { return fmt.Sprintf("R-%s-%06d", runID, i) }

// Republished reports whether a mixed run publishes eventID twice: about
// one event in ten, chosen by a hash of the id, so that a verifier that
// knows only the run id finds the same ones.
func Republished(eventID string) bool {
	h := fnv.New32a()
	h.Write([]byte(eventID))
	return h.Sum32()%10 == 0
}

// MixedEvents returns the events of order i of a mixed run in the order
// they are published, the copies of the republished ones last: OrderPaid,
// then the refund event of its shape (the two reversed when Reversed).
// They share the order's key, so they reach its partition in this order.
func MixedEvents(runID string, i, skus int, occurredAt time.Time) ([]event.Envelope, error) {
	paid, err := OrderPaid(runID, i, skus, occurredAt)
	if err != nil {
		return nil, err
	}
	events := []event.Envelope{paid}
	if ShapeOf(i) != ShapePaid {
		refund, err := refundEvent(runID, i, skus, occurredAt)
		if err != nil {
			return nil, err
		}
		events = append(events, refund)
	}
	if Reversed(i) {
		slices.Reverse(events)
	}
	for _, env := range slices.Clone(events) {
		if Republished(env.EventID) {
			events = append(events, env)
		}
	}
	return events, nil
}

// refundEvent is the OrderRefunded or OrderRefundRejected of order i.
func refundEvent(runID string, i, skus int, occurredAt time.Time) (event.Envelope, error) {
	amount, err := event.ParseMoney(UnitPrice)
	if err != nil {
		return event.Envelope{}, err
	}
	eventID := RefundEventID(runID, i)
	if ShapeOf(i) == ShapeRefundRejected {
		return build(event.OrderRefundRejected, runID, i, eventID, RefundVersion, occurredAt, event.OrderRefundRejectedData{
			RefundID: RefundID(runID, i), Amount: amount, Currency: Currency,
			CustomerID: CustomerID(runID, i), Reason: "REFUND_EXCEEDS_PAYMENT",
		})
	}
	items := []event.Item{{SKU: SKUFor(runID, i, skus), Quantity: ItemQuantity}}
	return build(event.OrderRefunded, runID, i, eventID, RefundVersion, occurredAt, event.OrderRefundedData{
		RefundID: RefundID(runID, i), PaymentID: PaymentID(runID, i),
		RefundedAmount: amount, TotalRefundedAmount: amount, Currency: Currency,
		CustomerID: CustomerID(runID, i), Items: items, TotalReturnedItems: items,
	})
}
