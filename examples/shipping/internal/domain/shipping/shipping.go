// Package shipping holds the rules of the shipping example: a paid order
// becomes one shipment of its goods, and the goods its refunds return come
// off the shipment before it leaves; once nothing is left to ship it is
// cancelled. It knows nothing of SQL, HTTP or Kafka, so its rules are
// tested as plain functions.
package shipping

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Status is the shipping service's view of one order.
type Status string

// The shipping states of an order: NONE → TO_SHIP when it is paid, and
// CANCELLED once refunds have returned every unit it ordered.
const (
	StatusNone      Status = "NONE"
	StatusToShip    Status = "TO_SHIP"
	StatusCancelled Status = "CANCELLED"
)

// PaidFrom returns the states an OrderPaid applies from: an order is
// shipped once, so a second payment of it is never applied.
func PaidFrom() []Status { return []Status{StatusNone} }

// RefundedFrom returns the states an OrderRefunded applies from. A
// cancelled shipment is one of them: a later refund changes nothing there,
// but applying it in its turn is what lets the version guard go on to the
// order's next events instead of parking it until PARK_DEADLINE.
func RefundedFrom() []Status { return []Status{StatusToShip, StatusCancelled} }

var (
	// ErrNotFound means the order has no shipment: it is not paid, or its
	// payment has not been applied yet.
	ErrNotFound = errors.New("shipment not found")
	// ErrIllegalTransition means an event arrived in a state its rule does
	// not cover; the version guard should have prevented it.
	ErrIllegalTransition = errors.New("illegal shipping transition")
)

// Line is a quantity of one SKU.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// Shipment is one order's shipment.
type Shipment struct {
	OrderID string
	Status  Status
	// Ordered is what the order paid for; ToShip is what is still to go
	// out, which only ever shrinks.
	Ordered []Line
	ToShip  []Line
}

// Change is a shipment as one applied event left it.
type Change struct {
	EventID   string
	EventType string
	Shipment  Shipment
}

// Applied is a change as it was recorded, for the shipment's history.
type Applied struct {
	EventID   string
	EventType string
	Status    Status
	ToShip    []Line
	AppliedAt time.Time
}

// Lines checks lines by the contract's rules and sums each SKU's
// quantities, sorted by SKU, so an order listing a SKU twice is one line
// and two shipments of the same goods compare equal.
func Lines(lines []Line) ([]Line, error) {
	sums := make(map[string]int, len(lines))
	for _, l := range lines {
		if err := rules.ValidateID("sku", l.SKU); err != nil {
			return nil, err
		}
		if err := rules.ValidateQuantity("quantity of "+l.SKU, l.Quantity); err != nil {
			return nil, err
		}
		sums[l.SKU] += l.Quantity
	}
	out := make([]Line, 0, len(sums))
	for sku, q := range sums {
		out = append(out, Line{SKU: sku, Quantity: q})
	}
	slices.SortFunc(out, func(a, b Line) int { return strings.Compare(a.SKU, b.SKU) })
	return out, nil
}

// Pay decides an OrderPaid: a shipment TO_SHIP of the order's goods.
func (s Shipment) Pay(items []Line) (Shipment, error) {
	if !slices.Contains(PaidFrom(), s.Status) {
		return Shipment{}, fmt.Errorf("%w: OrderPaid in %s", ErrIllegalTransition, s.Status)
	}
	lines, err := Lines(items)
	if err != nil {
		return Shipment{}, err
	}
	if len(lines) == 0 {
		return Shipment{}, rules.Invalid("items", "must list at least one line")
	}
	return Shipment{OrderID: s.OrderID, Status: StatusToShip, Ordered: lines, ToShip: lines}, nil
}

// Refund decides an OrderRefunded from the goods the order's refunds have
// returned so far, a running total: what is left to ship is what was
// ordered less that total, so a refund whose predecessor was never applied
// here still leaves the right goods. Goods never come back onto a
// shipment, a SKU the order did not have is ignored, and a cancelled
// shipment stays cancelled.
func (s Shipment) Refund(totalReturned []Line) (Shipment, error) {
	if !slices.Contains(RefundedFrom(), s.Status) {
		return Shipment{}, fmt.Errorf("%w: OrderRefunded in %s", ErrIllegalTransition, s.Status)
	}
	returned, err := Lines(totalReturned)
	if err != nil {
		return Shipment{}, err
	}
	if s.Status == StatusCancelled {
		return s, nil
	}
	back, left := quantities(returned), quantities(s.ToShip)
	next := Shipment{OrderID: s.OrderID, Status: StatusToShip, Ordered: s.Ordered, ToShip: []Line{}}
	for _, l := range s.Ordered {
		if q := min(left[l.SKU], l.Quantity-back[l.SKU]); q > 0 {
			next.ToShip = append(next.ToShip, Line{SKU: l.SKU, Quantity: q})
		}
	}
	if len(next.ToShip) == 0 {
		next.Status = StatusCancelled
	}
	return next, nil
}

func quantities(lines []Line) map[string]int {
	out := make(map[string]int, len(lines))
	for _, l := range lines {
		out[l.SKU] += l.Quantity
	}
	return out
}
