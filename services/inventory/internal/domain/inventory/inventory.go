// Package inventory holds the stock rules of the inventory service: an order
// is paid for in full or not at all, a refund gives back exactly what was
// deducted, and stock never goes below zero. It knows nothing of SQL, HTTP
// or Kafka, so its rules are tested as plain functions.
package inventory

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Status is inventory's view of one order.
type Status string

// The inventory states of an order: NONE → DEDUCTED → PARTIALLY_RESTOCKED
// → RESTOCKED as refunds return its goods (a refund of money alone leaves
// it where it is), or REJECTED when the stock was not there.
const (
	StatusNone               Status = "NONE"
	StatusDeducted           Status = "DEDUCTED"
	StatusPartiallyRestocked Status = "PARTIALLY_RESTOCKED"
	StatusRestocked          Status = "RESTOCKED"
	StatusRejected           Status = "REJECTED"
)

// ReasonInsufficientStock is recorded on an order whose payment could not be
// covered by stock; it is a business outcome, not a failure to retry.
const ReasonInsufficientStock = "INSUFFICIENT_STOCK"

// PaidFrom and RefundedFrom are the states an OrderPaid and an OrderRefunded
// may be applied from; any other state means a predecessor is missing.
var (
	PaidFrom     = []Status{StatusNone}
	RefundedFrom = []Status{StatusDeducted, StatusPartiallyRestocked, StatusRestocked, StatusRejected}
)

// MovementKind says why stock moved.
type MovementKind string

// The kinds of stock movement.
const (
	KindDeduct  MovementKind = "DEDUCT"
	KindRestock MovementKind = "RESTOCK"
)

// MaxStock is the largest stock figure a SKU can hold: the database
// stores stock as a 32-bit integer, so larger values are refused up front
// rather than failing inside a transaction.
const MaxStock = math.MaxInt32

var (
	// ErrSKUNotFound means no stock row exists for the SKU.
	ErrSKUNotFound = errors.New("sku not found")
	// ErrInvalidAvailable means a stock level outside 0..MaxStock.
	ErrInvalidAvailable = fmt.Errorf("available must be an integer between 0 and %d", MaxStock)
	// ErrInvalidQuantity means order lines whose quantities of one SKU add
	// up beyond a stock figure.
	ErrInvalidQuantity = errors.New("quantities of one SKU exceed the stock range")
	// ErrIllegalTransition means an event arrived in a state its rule does
	// not cover; the version guard should have prevented it.
	ErrIllegalTransition = errors.New("illegal inventory transition")
)

// Line is a quantity of one SKU.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// Stock is the level of one SKU: what can still be sold and what paid
// orders currently hold.
type Stock struct {
	SKU       string
	Available int
	Deducted  int
}

// Movement is one change of one SKU's stock caused by one event.
type Movement struct {
	SKU   string
	Delta int
	Kind  MovementKind
}

// AppliedMovement is a movement as recorded: the event that caused it and
// when it was committed.
type AppliedMovement struct {
	Movement
	OrderID   string
	EventID   string
	CreatedAt time.Time
}

// Order is inventory's record of one order: its state and, once paid, the
// lines it deducted and those refunds have brought back, so refunds never
// restock more than was deducted.
type Order struct {
	ID        string
	Status    Status
	Reason    string
	Items     []Line
	Restocked []Line
}

// Shortage is one SKU an order wanted more of than was available.
type Shortage struct {
	SKU       string
	Requested int
	Available int
}

// Change is what one event does: the order's new record and the stock
// movements that go with it, sorted by SKU so rows are always touched in
// the same order.
type Change struct {
	Order     Order
	Movements []Movement
	// Shortages says why a payment was rejected; empty otherwise.
	Shortages []Shortage
}

// EventChange is the change one event made, as it is recorded.
type EventChange struct {
	EventID string
	Change  Change
}

// ValidateSKU checks a SKU given by a client by the contract's id rule,
// the one the order service applies to the SKUs it accepts.
func ValidateSKU(sku string) error { return rules.ValidateID("sku", sku) }

// ValidateAvailable checks a stock level set by an operator.
func ValidateAvailable(n int) error {
	if n < 0 || n > MaxStock {
		return ErrInvalidAvailable
	}
	return nil
}

// Aggregate sums the quantities of each SKU and sorts the result by SKU, so
// an order listing a SKU twice moves its stock once and every transaction
// locks stock rows in the same order (which rules out deadlocks on hot SKUs).
func Aggregate(lines []Line) ([]Line, error) {
	sums := make(map[string]int, len(lines))
	for _, l := range lines {
		if err := ValidateSKU(l.SKU); err != nil {
			return nil, err
		}
		if err := rules.ValidateQuantity("quantity of "+l.SKU, l.Quantity); err != nil {
			return nil, err
		}
		if l.Quantity > MaxStock-sums[l.SKU] {
			return nil, fmt.Errorf("sku %s quantity %d: %w", l.SKU, l.Quantity, ErrInvalidQuantity)
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

// SKUs returns the distinct SKUs of lines in sorted order: the order in
// which their stock rows are locked.
func SKUs(lines []Line) []string {
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		out = append(out, l.SKU)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Pay decides an OrderPaid for the order given the available stock of its
// SKUs (a SKU missing from available has none). Either every line is
// deducted, or the order is REJECTED with INSUFFICIENT_STOCK and no stock
// moves at all.
func (o Order) Pay(lines []Line, available map[string]int) (Change, error) {
	if !slices.Contains(PaidFrom, o.Status) {
		return Change{}, fmt.Errorf("%w: OrderPaid in %s", ErrIllegalTransition, o.Status)
	}
	agg, err := Aggregate(lines)
	if err != nil {
		return Change{}, err
	}
	next := Order{ID: o.ID, Status: StatusDeducted, Items: agg}
	var shortages []Shortage
	for _, l := range agg {
		if have := available[l.SKU]; have < l.Quantity {
			shortages = append(shortages, Shortage{SKU: l.SKU, Requested: l.Quantity, Available: have})
		}
	}
	if len(shortages) > 0 {
		next.Status, next.Reason = StatusRejected, ReasonInsufficientStock
		return Change{Order: next, Shortages: shortages}, nil
	}
	moves := make([]Movement, 0, len(agg))
	for _, l := range agg {
		moves = append(moves, Movement{SKU: l.SKU, Delta: -l.Quantity, Kind: KindDeduct})
	}
	return Change{Order: next, Movements: moves}, nil
}

// Refund decides an OrderRefunded: the order's goods returned so far, by
// all its refunds, come back to stock, but never more of a SKU than it
// deducted and never one unit twice. The event carries that running total,
// so applying the latest refund is enough even when an earlier one was
// never applied here. A REJECTED order never took anything and stays
// REJECTED.
func (o Order) Refund(totalReturned []Line) (Change, error) {
	switch o.Status {
	case StatusDeducted, StatusPartiallyRestocked, StatusRestocked:
	case StatusRejected:
		return Change{Order: o}, nil
	default:
		return Change{}, fmt.Errorf("%w: OrderRefunded in %s", ErrIllegalTransition, o.Status)
	}
	returned := quantities(totalReturned)
	restocked := quantities(o.Restocked)
	next := o
	next.Restocked = nil
	var moves []Movement
	backInFull := true
	for _, l := range o.Items {
		target := min(returned[l.SKU], l.Quantity)
		if target > restocked[l.SKU] {
			moves = append(moves, Movement{SKU: l.SKU, Delta: target - restocked[l.SKU], Kind: KindRestock})
		}
		back := max(target, restocked[l.SKU])
		if back > 0 {
			next.Restocked = append(next.Restocked, Line{SKU: l.SKU, Quantity: back})
		}
		backInFull = backInFull && back == l.Quantity
	}
	switch {
	case backInFull:
		next.Status = StatusRestocked
	case len(next.Restocked) > 0:
		next.Status = StatusPartiallyRestocked
	default:
		next.Status = StatusDeducted
	}
	slices.SortFunc(moves, func(a, b Movement) int { return strings.Compare(a.SKU, b.SKU) })
	return Change{Order: next, Movements: moves}, nil
}

func quantities(lines []Line) map[string]int {
	out := make(map[string]int, len(lines))
	for _, l := range lines {
		out[l.SKU] += l.Quantity
	}
	return out
}
