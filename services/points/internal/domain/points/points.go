// Package points holds the loyalty rules of the points service: a paid
// order earns one point per whole currency unit paid, a refund reverses one
// point per whole unit refunded, and an order's points never go below zero.
// It knows nothing of SQL, HTTP or Kafka, so its rules are tested as plain
// functions.
package points

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// State is the points service's view of one order.
type State string

// The points states of an order: NONE → EARNED → REVERSED, or
// REVERSAL_REJECTED when a reversal would take the order below zero.
const (
	StateNone             State = "NONE"
	StateEarned           State = "EARNED"
	StateReversed         State = "REVERSED"
	StateReversalRejected State = "REVERSAL_REJECTED"
)

// PaidFrom and RefundedFrom are the states an OrderPaid and an OrderRefunded
// may be applied from; any other state means a predecessor is missing.
var (
	PaidFrom     = []State{StateNone}
	RefundedFrom = []State{StateEarned}
)

// EntryType says why points moved.
type EntryType string

// The ledger entry types.
const (
	EntryEarn     EntryType = "EARN"
	EntryReversal EntryType = "REVERSAL"
)

// ReasonBelowZero is logged when a reversal is refused because it would
// leave the order with negative points.
const ReasonBelowZero = "REVERSAL_BELOW_ZERO"

var (
	// ErrIllegalTransition means an event arrived in a state its rule does
	// not cover; the version guard should have prevented it.
	ErrIllegalTransition = errors.New("illegal points transition")
)

// Entry is one line of the points ledger: points earned (positive) or
// reversed (negative) and the money amount they were computed from.
type Entry struct {
	Type   EntryType
	Points int64
	Amount decimal.Decimal
}

// LedgerEntry is an entry as recorded: whose it is, the event that caused
// it and when it was committed.
type LedgerEntry struct {
	Entry
	OrderID    string
	CustomerID string
	EventID    string
	CreatedAt  time.Time
}

// Order is the points service's view of one order: its state and the points
// its ledger entries add up to.
type Order struct {
	ID     string
	State  State
	Points int64
}

// Change is what one event does: the order's new state and the ledger
// entry to write, if any.
type Change struct {
	State State
	// Entry is nil when the event writes nothing (a rejected reversal).
	Entry *Entry
	// Rejection names why a reversal was refused; empty otherwise.
	Rejection string
}

// PointsFor returns the points an amount is worth: one per whole unit,
// rounded down ("80.99" is 80 points). The contract's largest amount,
// 9999999999999999.99, is worth 9999999999999999 points, which the ledger's
// BIGINT holds.
func PointsFor(amount decimal.Decimal) (int64, error) {
	if err := event.ValidateAmount("amount", amount); err != nil {
		return 0, err
	}
	return amount.Floor().IntPart(), nil
}

// Pay decides an OrderPaid: one EARN entry of floor(paid) points.
func (o Order) Pay(paid decimal.Decimal) (Change, error) {
	if !slices.Contains(PaidFrom, o.State) {
		return Change{}, fmt.Errorf("%w: OrderPaid in %s", ErrIllegalTransition, o.State)
	}
	n, err := PointsFor(paid)
	if err != nil {
		return Change{}, err
	}
	return Change{State: StateEarned, Entry: &Entry{Type: EntryEarn, Points: n, Amount: paid}}, nil
}

// Refund decides an OrderRefunded: one REVERSAL entry of -floor(refunded)
// points, unless that would leave the order below zero points; then nothing
// is written and the order is REVERSAL_REJECTED, a business outcome that is
// recorded, never retried.
func (o Order) Refund(refunded decimal.Decimal) (Change, error) {
	if !slices.Contains(RefundedFrom, o.State) {
		return Change{}, fmt.Errorf("%w: OrderRefunded in %s", ErrIllegalTransition, o.State)
	}
	n, err := PointsFor(refunded)
	if err != nil {
		return Change{}, err
	}
	if o.Points-n < 0 {
		return Change{State: StateReversalRejected, Rejection: ReasonBelowZero}, nil
	}
	return Change{State: StateReversed, Entry: &Entry{Type: EntryReversal, Points: -n, Amount: refunded}}, nil
}
