// Package points holds the loyalty rules of the points service: an order
// is worth one point per whole currency unit paid and not refunded
// (rules.PointsFor, the rule reconciliation checks too). A payment earns
// them; each refund writes one reversal that brings the order to what it is
// now worth, so its points never go below zero and a full refund reverses
// exactly what was earned. It knows nothing of SQL, HTTP or Kafka, so its
// rules are tested as plain functions.
package points

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// State is the points service's view of one order.
type State string

// The points states of an order: NONE → EARNED → PARTIALLY_REVERSED →
// REVERSED as refunds give the money back. REVERSAL_REJECTED was the state
// of a refund the first release could not reverse; an order in it takes
// later refunds like any other.
const (
	StateNone              State = "NONE"
	StateEarned            State = "EARNED"
	StatePartiallyReversed State = "PARTIALLY_REVERSED"
	StateReversed          State = "REVERSED"
	StateReversalRejected  State = "REVERSAL_REJECTED"
)

// PaidFrom and RefundedFrom are the states an OrderPaid and an OrderRefunded
// may be applied from; any other state means a predecessor is missing.
var (
	PaidFrom     = []State{StateNone}
	RefundedFrom = []State{StateEarned, StatePartiallyReversed, StateReversed, StateReversalRejected}
)

// EntryType says why points moved.
type EntryType string

// The ledger entry types.
const (
	EntryEarn     EntryType = "EARN"
	EntryReversal EntryType = "REVERSAL"
)

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

// Order is the points service's view of one order: its state and what its
// ledger entries add up to.
type Order struct {
	ID     string
	State  State
	Points int64
	// Paid is the amount the EARN entry was computed from; Refunded the sum
	// of the amounts the REVERSAL entries were.
	Paid     decimal.Decimal
	Refunded decimal.Decimal
}

// Change is what one event does: the order's new state and the ledger
// entry to write.
type Change struct {
	State State
	Entry Entry
}

// Pay decides an OrderPaid: one EARN entry of what the payment is worth.
func (o Order) Pay(paid decimal.Decimal) (Change, error) {
	if !slices.Contains(PaidFrom, o.State) {
		return Change{}, fmt.Errorf("%w: OrderPaid in %s", ErrIllegalTransition, o.State)
	}
	if err := rules.ValidatePositiveAmount("paidAmount", paid); err != nil {
		return Change{}, err
	}
	return Change{State: StateEarned, Entry: Entry{Type: EntryEarn, Points: rules.PointsFor(paid, decimal.Zero), Amount: paid}}, nil
}

// Refund decides an OrderRefunded from the order's running refunded total:
// one REVERSAL entry that brings the order to what it is worth after it
// (zero points when the refund changes no whole unit: one entry per
// refund, so the ledger tells every refund). The total makes a refund whose
// predecessor was never applied here still land on the right figure.
func (o Order) Refund(totalRefunded decimal.Decimal) (Change, error) {
	if !slices.Contains(RefundedFrom, o.State) {
		return Change{}, fmt.Errorf("%w: OrderRefunded in %s", ErrIllegalTransition, o.State)
	}
	if err := rules.ValidatePositiveAmount("totalRefundedAmount", totalRefunded); err != nil {
		return Change{}, err
	}
	reversed := min(rules.PointsFor(o.Paid, totalRefunded)-o.Points, 0)
	amount := decimal.Max(totalRefunded.Sub(o.Refunded), decimal.Zero)
	state := StatePartiallyReversed
	if totalRefunded.GreaterThanOrEqual(o.Paid) {
		state = StateReversed
	}
	return Change{State: state, Entry: Entry{Type: EntryReversal, Points: reversed, Amount: amount}}, nil
}
