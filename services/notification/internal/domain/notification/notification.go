// Package notification holds the messaging rules of the notification
// service: a customer hears exactly once about each customer-facing event
// of an order (paid, each refund, each declined refund, a payment returned
// because the order was cancelled), in order, and never about anything
// else. It knows nothing of SQL, HTTP or Kafka, so its rules are
// tested as plain functions.
package notification

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// State is the notification service's view of one order: what the
// customer has last been told.
type State string

// The notification states of an order.
const (
	StateNone             State = "NONE"
	StatePaidNotified     State = "PAID_NOTIFIED"
	StateRefundedNotified State = "REFUNDED_NOTIFIED"
	StateReturnNotified   State = "RETURN_NOTIFIED"
)

// Kind names a customer-facing event.
type Kind string

// The kinds of notification, one per customer-facing event.
const (
	KindOrderPaid       Kind = "ORDER_PAID"
	KindOrderRefunded   Kind = "ORDER_REFUNDED"
	KindRefundRejected  Kind = "REFUND_REJECTED"
	KindPaymentReturned Kind = "PAYMENT_RETURNED"
)

// ChannelInApp is the channel of the default sender: the notification is
// kept in the service's own table, where an app reads it.
const ChannelInApp = "IN_APP"

// ReasonRefundExceedsPayment is the payment service's reason for declining
// a refund larger than what is left of the payment.
const ReasonRefundExceedsPayment = "REFUND_EXCEEDS_PAYMENT"

type rule struct {
	from []State
	// to is the state it leads to; empty: the state it was sent from.
	to State
}

// rules is the state machine: which states each kind may be sent from and
// the state it leads to. An order may be refunded several times, so a
// refund is told after the payment or after an earlier refund; a declined
// refund leaves the order where it was.
func rules(k Kind) (rule, bool) {
	refundable := []State{StatePaidNotified, StateRefundedNotified}
	switch k {
	case KindOrderPaid:
		return rule{from: []State{StateNone}, to: StatePaidNotified}, true
	case KindOrderRefunded:
		return rule{from: refundable, to: StateRefundedNotified}, true
	case KindRefundRejected:
		return rule{from: refundable}, true
	case KindPaymentReturned:
		// The order was never paid: it was cancelled before the payment
		// reached it.
		return rule{from: []State{StateNone}, to: StateReturnNotified}, true
	}
	return rule{}, false
}

// From returns the states a notification of kind k may be sent from; any
// other state means a predecessor is missing.
func From(k Kind) []State {
	r, _ := rules(k)
	return r.from
}

var (
	// ErrUnknownKind means a kind without a rule.
	ErrUnknownKind = errors.New("unknown notification kind")
	// ErrIllegalTransition means an event arrived in a state its rule does
	// not cover; the version guard should have prevented it.
	ErrIllegalTransition = errors.New("illegal notification transition")
)

// Facts is what a customer-facing event tells: only opaque ids, amounts and
// reason codes, never personal data.
type Facts struct {
	Kind       Kind
	OrderID    string
	CustomerID string
	EventID    string
	// Amount is the decimal amount as the event carries it ("80.00").
	Amount   string
	Currency string
	// Reason is the reason code of a declined refund.
	Reason string
	// OutOfStock: a refund the order made itself because the stock could
	// not cover it; the order is cancelled, and the customer is told why.
	OutOfStock bool
	// GoodsOnly: a refund of goods whose money came back before (a refund
	// of money alone came first); the customer is told they arrived.
	GoodsOnly bool
}

// Notification is one message to a customer.
type Notification struct {
	OrderID    string
	CustomerID string
	// EventID is the event the message tells about: its idempotency key.
	EventID string
	Kind    Kind
	Channel string
	Body    string
}

// Sent is a notification as recorded, with when it was committed.
type Sent struct {
	Notification
	CreatedAt time.Time
}

// Order is the notification service's view of one order.
type Order struct {
	ID    string
	State State
}

// Change is what one event does: the order's new state and the message to
// send.
type Change struct {
	State        State
	Notification Notification
}

// Notify decides the message for f and the state it leads to.
func (o Order) Notify(f Facts) (Change, error) {
	r, ok := rules(f.Kind)
	if !ok {
		return Change{}, fmt.Errorf("%w: %q", ErrUnknownKind, f.Kind)
	}
	if !slices.Contains(r.from, o.State) {
		return Change{}, fmt.Errorf("%w: %s in %s", ErrIllegalTransition, f.Kind, o.State)
	}
	to := r.to
	if to == "" {
		to = o.State
	}
	return Change{State: to, Notification: Notification{
		OrderID:    o.ID,
		CustomerID: f.CustomerID,
		EventID:    f.EventID,
		Kind:       f.Kind,
		Channel:    ChannelInApp,
		Body:       Body(f),
	}}, nil
}

// PerFact lists the kinds that tell of a fact of their own (a refund, a
// declined refund, a returned payment): each is told once whenever its
// event arrives, even after a newer event of the order.
func PerFact() []Kind { return []Kind{KindOrderRefunded, KindRefundRejected, KindPaymentReturned} }

// Late is the message for f when its event arrives after a newer event of
// the order was told (dead-lettered and replayed, say): a per-fact kind is
// told and the order's state stays where the newer event left it; any other
// kind is ErrIllegalTransition, since a newer event replaced what it says.
func (o Order) Late(f Facts) (Notification, error) {
	if !slices.Contains(PerFact(), f.Kind) {
		return Notification{}, fmt.Errorf("%w: %s told after a newer event", ErrIllegalTransition, f.Kind)
	}
	return Notification{OrderID: o.ID, CustomerID: f.CustomerID, EventID: f.EventID, Kind: f.Kind,
		Channel: ChannelInApp, Body: Body(f)}, nil
}

// Body is the text the customer reads. It names the order and the amount,
// and explains a declined refund in words rather than codes.
func Body(f Facts) string {
	switch f.Kind {
	case KindOrderPaid:
		return fmt.Sprintf("We received your payment of %s %s for order %s. We are preparing your items.",
			f.Amount, f.Currency, f.OrderID)
	case KindOrderRefunded:
		if f.GoodsOnly {
			return fmt.Sprintf("We received the items you sent back for order %s. Their money had already been refunded to you.", f.OrderID)
		}
		if f.OutOfStock {
			return fmt.Sprintf("We are sorry: the items of order %s are out of stock. The order is cancelled and %s %s has been refunded to you.",
				f.OrderID, f.Amount, f.Currency)
		}
		return fmt.Sprintf("Your refund of %s %s for order %s is complete.", f.Amount, f.Currency, f.OrderID)
	case KindRefundRejected:
		return fmt.Sprintf("Your refund request of %s %s for order %s was declined: %s.",
			f.Amount, f.Currency, f.OrderID, declineReason(f.Reason))
	case KindPaymentReturned:
		return fmt.Sprintf("Your payment of %s %s reached order %s after it was cancelled; it has been returned to you in full.",
			f.Amount, f.Currency, f.OrderID)
	}
	return ""
}

func declineReason(code string) string {
	if code == ReasonRefundExceedsPayment {
		return "it is more than what is left of your payment"
	}
	return "please contact support"
}
