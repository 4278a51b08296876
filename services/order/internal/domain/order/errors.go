package order

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned for an order id that does not exist, so callers
// can answer 404 instead of a failure.
var ErrNotFound = errors.New("order not found")

// ErrExists is returned when an order id is created again with different
// content; creating it again with the same content is an idempotent repeat.
var ErrExists = errors.New("order already exists with different content")

// ErrConcurrentUpdate is returned when the stored version moved between
// reading and writing an order, so a lost update is refused rather than
// silently overwriting the other writer.
var ErrConcurrentUpdate = errors.New("order was changed concurrently")

// ErrRefundInFlight is returned when a shortage is reported while a refund
// of the order waits for the payment service: the order can ask for the
// rest of its money only once that refund is settled, so the report is
// answered as a conflict and its sender delivers it again later.
var ErrRefundInFlight = errors.New("a refund of the order is in flight")

// Action names what was asked of an order, so a refused transition says
// both where the order was and what could not happen from there.
type Action string

// The actions an order accepts.
const (
	ActionCheckout       Action = "checkout"
	ActionCancel         Action = "cancel"
	ActionRequestRefund  Action = "request refund"
	ActionPay            Action = "pay"
	ActionCompleteRefund Action = "complete refund"
	ActionRejectRefund   Action = "reject refund"
	ActionCompensate     Action = "compensate a shortage of"
)

// TransitionError is a business rejection: the order's status does not
// allow the action. It is an answer, not a failure, so it is never retried.
type TransitionError struct {
	From   Status
	Action Action
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("cannot %s an order in status %s", e.Action, e.From)
}

// MismatchError is a business rejection of a callback whose facts disagree
// with the order (a payment of the wrong amount, a refund that was never
// requested): applying it would corrupt the order, retrying cannot help.
type MismatchError struct {
	Field string
	Want  string
	Got   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s mismatch: order has %s, callback has %s", e.Field, e.Want, e.Got)
}

// ReturnError is a business rejection of a refund that would return more
// of a SKU than the order still holds.
type ReturnError struct {
	SKU      string
	Ordered  int
	Returned int
	Asked    int
}

func (e *ReturnError) Error() string {
	return fmt.Sprintf("cannot return %d of %s: %d ordered, %d already returned", e.Asked, e.SKU, e.Ordered, e.Returned)
}
