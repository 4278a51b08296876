package loadgen

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Producer is the envelope's producer: the consumers do not care who
// published an event, a reader of the topic does.
const Producer = "publish-orders"

// What every generated order buys and pays.
const (
	Currency  = "CNY"
	UnitPrice = "10.00"
	// PaidVersion is the order's aggregateVersion once paid (docs/design.md,
	// Order lifecycle).
	PaidVersion = 3
	// ItemQuantity is how many units of its SKU each order buys.
	ItemQuantity = 1
)

// OrderID is the id of order i (1-based) of a run: O-<run>-000001.
func OrderID(runID string, i int) string { return fmt.Sprintf("O-%s-%06d", runID, i) }

// EventID is the eventId of the OrderPaid event of order i: readable, and
// the same in every run with this run id.
func EventID(runID string, i int) string { return fmt.Sprintf("E-%s-%06d", runID, i) }

// PaymentID is the paymentId in the OrderPaid event of order i.
func PaymentID(runID string, i int) string { return fmt.Sprintf("P-%s-%06d", runID, i) }

// CustomerID is the customer of order i: one per order, so the points
// ledger has no hot customer.
func CustomerID(runID string, i int) string { return fmt.Sprintf("C-%s-%06d", runID, i) }

// SKU is the k-th SKU (1-based) of a run. The SKUs belong to the run, so a
// run's stock and its hot rows are its own.
func SKU(runID string, k int) string { return fmt.Sprintf("SKU-%s-%d", runID, k) }

// SKUFor is the SKU order i buys: round robin over skus.
func SKUFor(runID string, i, skus int) string { return SKU(runID, (i-1)%skus+1) }

// OrderPaid builds the schema-valid OrderPaid v1 event of order i, paid at
// occurredAt: ItemQuantity of SKUFor at UnitPrice.
func OrderPaid(runID string, i, skus int, occurredAt time.Time) (event.Envelope, error) {
	amount, err := event.ParseMoney(UnitPrice)
	if err != nil {
		return event.Envelope{}, err
	}
	return build(event.OrderPaid, runID, i, EventID(runID, i), PaidVersion, occurredAt, event.OrderPaidData{
		PaymentID:  PaymentID(runID, i),
		PaidAmount: amount,
		Currency:   Currency,
		CustomerID: CustomerID(runID, i),
		Items:      []event.Item{{SKU: SKUFor(runID, i, skus), Quantity: ItemQuantity}},
	})
}

// build is order i's event of type t with data, eventID at version,
// occurred at occurredAt. Its trace id is derived from the event id, so a
// re-run republishes it unchanged but for occurredAt.
func build(t event.Type, runID string, i int, eventID string, version int64, occurredAt time.Time, data any) (event.Envelope, error) {
	trace := sha256.Sum256([]byte(eventID))
	env, err := event.New(t, event.Meta{
		AggregateID:      OrderID(runID, i),
		AggregateVersion: version,
		Producer:         Producer,
		TraceID:          hex.EncodeToString(trace[:16]),
		OccurredAt:       occurredAt,
	}, data)
	if err != nil {
		return event.Envelope{}, fmt.Errorf("build %s of order %d: %w", t, i, err)
	}
	env.EventID = eventID
	return env, nil
}
