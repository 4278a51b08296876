package order

import (
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// EventType names the event a state change emits; the values are the
// eventType names of the order-events contract.
type EventType string

// The events of the order lifecycle (DESIGN §2).
const (
	EventCreated         EventType = "OrderCreated"
	EventCheckedOut      EventType = "OrderCheckedOut"
	EventPaid            EventType = "OrderPaid"
	EventRefundRequested EventType = "OrderRefundRequested"
	EventRefunded        EventType = "OrderRefunded"
	EventRefundRejected  EventType = "OrderRefundRejected"
	EventCancelled       EventType = "OrderCancelled"
)

// Event is what one state change emits. The order itself carries the rest
// of what the event's payload needs (customer, items, payment id).
type Event struct {
	Type EventType
	// Version is the order's version after the change: the event's
	// aggregateVersion.
	Version int64
	// RefundID and Amount describe the refund of refund events.
	RefundID string
	Amount   decimal.Decimal
	// Reason explains a cancellation or a refund rejection.
	Reason string
}

// CreatedEvent is the event of a new order.
func (o *Order) CreatedEvent() Event {
	return Event{Type: EventCreated, Version: o.Version}
}

// change moves the order to status to: one state change, one version, one
// event.
func (o *Order) change(to Status, e Event) []Event {
	o.Status = to
	o.Version++
	e.Version = o.Version
	return []Event{e}
}

// Checkout makes a created order payable. Checking out an order that is
// already waiting for payment is a repeat and changes nothing.
func (o *Order) Checkout() ([]Event, error) {
	switch o.Status {
	case StatusCreated:
		return o.change(StatusPendingPayment, Event{Type: EventCheckedOut}), nil
	case StatusPendingPayment:
		return nil, nil
	}
	return nil, &TransitionError{From: o.Status, Action: ActionCheckout}
}

// Cancel cancels an order nobody has paid for. Cancelling a cancelled order
// is a repeat and changes nothing.
func (o *Order) Cancel(reason string) ([]Event, error) {
	if err := event.ValidateReason("reason", reason); err != nil {
		return nil, err
	}
	switch o.Status {
	case StatusCreated, StatusPendingPayment:
		return o.change(StatusCancelled, Event{Type: EventCancelled, Reason: reason}), nil
	case StatusCancelled:
		return nil, nil
	}
	return nil, &TransitionError{From: o.Status, Action: ActionCancel}
}

// RequestRefund asks for amount back on a paid order. The amount is not
// checked against the payment here: the payment service owns what was paid
// and rejects a refund above it, which brings the order back to PAID.
func (o *Order) RequestRefund(refundID string, amount decimal.Decimal) ([]Event, error) {
	if err := event.ValidateID("refundId", refundID); err != nil {
		return nil, err
	}
	if err := event.ValidatePositiveAmount("amount", amount); err != nil {
		return nil, err
	}
	if o.Status != StatusPaid {
		return nil, &TransitionError{From: o.Status, Action: ActionRequestRefund}
	}
	o.RefundID = refundID
	o.RefundAmount = amount
	return o.change(StatusRefunding, Event{Type: EventRefundRequested, RefundID: refundID, Amount: amount}), nil
}

// CallbackType is the kind of a payment service callback.
type CallbackType string

// The callbacks of the payment service (the order ⇄ payment contract).
const (
	CallbackPaymentSucceeded CallbackType = "PAYMENT_SUCCEEDED"
	CallbackRefundSucceeded  CallbackType = "REFUND_SUCCEEDED"
	CallbackRefundRejected   CallbackType = "REFUND_REJECTED"
)

// Callback is a payment service callback about this order.
type Callback struct {
	// ID is the eventId of the payment service's outbox row: the same for
	// every re-delivery, so it is the callback's idempotency key.
	ID        string
	Type      CallbackType
	OrderID   string
	PaymentID string
	RefundID  string
	Amount    decimal.Decimal
	Currency  string
	Reason    string
}

// Validate checks the callback's fields, so a malformed callback is
// refused before it touches an order.
func (cb Callback) Validate() error {
	if err := event.ValidateID("callbackId", cb.ID); err != nil {
		return err
	}
	switch cb.Type {
	case CallbackPaymentSucceeded, CallbackRefundSucceeded, CallbackRefundRejected:
	case "":
		return event.Invalid("type", "is required")
	default:
		return event.Invalid("type", "must be %s, %s or %s, got %q",
			CallbackPaymentSucceeded, CallbackRefundSucceeded, CallbackRefundRejected, cb.Type)
	}
	if err := event.ValidateID("orderId", cb.OrderID); err != nil {
		return err
	}
	if cb.Type == CallbackPaymentSucceeded || cb.PaymentID != "" {
		if err := event.ValidateID("paymentId", cb.PaymentID); err != nil {
			return err
		}
	}
	if cb.Type != CallbackPaymentSucceeded {
		if err := event.ValidateID("refundId", cb.RefundID); err != nil {
			return err
		}
	}
	if err := event.ValidatePositiveAmount("amount", cb.Amount); err != nil {
		return err
	}
	if err := event.ValidateCurrency("currency", cb.Currency); err != nil {
		return err
	}
	return event.ValidateReason("reason", cb.Reason)
}

// ApplyCallback applies a payment service callback. A callback for a
// transition the order has already made is a repeat: no events, no error.
// A callback that does not fit the order is a business rejection
// (*TransitionError or *MismatchError), so the sender stops retrying.
func (o *Order) ApplyCallback(cb Callback) ([]Event, error) {
	if err := cb.Validate(); err != nil {
		return nil, err
	}
	if cb.OrderID != o.ID {
		return nil, &MismatchError{Field: "orderId", Want: o.ID, Got: cb.OrderID}
	}
	switch cb.Type {
	case CallbackPaymentSucceeded:
		return o.pay(cb)
	case CallbackRefundSucceeded:
		return o.completeRefund(cb)
	default:
		return o.rejectRefund(cb)
	}
}

func (o *Order) pay(cb Callback) ([]Event, error) {
	switch o.Status {
	case StatusPaid, StatusRefunding, StatusRefunded:
		return nil, nil
	case StatusPendingPayment:
	default:
		return nil, &TransitionError{From: o.Status, Action: ActionPay}
	}
	if cb.Currency != o.Currency {
		return nil, &MismatchError{Field: "currency", Want: o.Currency, Got: cb.Currency}
	}
	if !cb.Amount.Equal(o.Amount) {
		return nil, &MismatchError{Field: "amount", Want: money(o.Amount), Got: money(cb.Amount)}
	}
	o.PaymentID = cb.PaymentID
	return o.change(StatusPaid, Event{Type: EventPaid}), nil
}

func (o *Order) completeRefund(cb Callback) ([]Event, error) {
	switch {
	case o.Status == StatusRefunded && cb.RefundID == o.RefundID:
		return nil, nil
	case o.Status != StatusRefunding:
		return nil, &TransitionError{From: o.Status, Action: ActionCompleteRefund}
	case cb.RefundID != o.RefundID:
		return nil, &MismatchError{Field: "refundId", Want: o.RefundID, Got: cb.RefundID}
	case cb.Currency != o.Currency:
		return nil, &MismatchError{Field: "currency", Want: o.Currency, Got: cb.Currency}
	}
	// The payment service is the authority on money moved, so the refunded
	// amount is the one it reports.
	o.RefundedAmount = o.RefundedAmount.Add(cb.Amount)
	return o.change(StatusRefunded, Event{Type: EventRefunded, RefundID: cb.RefundID, Amount: cb.Amount}), nil
}

func (o *Order) rejectRefund(cb Callback) ([]Event, error) {
	switch {
	case o.Status == StatusPaid && o.RefundID != "" && cb.RefundID == o.RefundID:
		return nil, nil
	case o.Status != StatusRefunding:
		return nil, &TransitionError{From: o.Status, Action: ActionRejectRefund}
	case cb.RefundID != o.RefundID:
		return nil, &MismatchError{Field: "refundId", Want: o.RefundID, Got: cb.RefundID}
	}
	return o.change(StatusPaid, Event{Type: EventRefundRejected, RefundID: o.RefundID, Amount: o.RefundAmount, Reason: cb.Reason}), nil
}

func money(d decimal.Decimal) string { return d.StringFixed(event.MoneyPlaces) }
