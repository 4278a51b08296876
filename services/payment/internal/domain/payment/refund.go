package payment

import (
	"errors"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Refund statuses in the refunds ledger.
const (
	RefundSucceeded = "SUCCEEDED"
	RefundRejected  = "REJECTED"
)

// RefundRequest is a refund asked of the payment service: by the order
// service (OrderRefundRequested, or OrderPaymentRejected for a payment the
// order could not take) or by an operator.
type RefundRequest struct {
	RefundID string
	OrderID  string
	// PaymentID is the payment the request names: what the callback
	// reports when the service holds no payment for the order.
	PaymentID string
	Amount    decimal.Decimal
	// Currency is the refund's; empty means the payment's (an operator's
	// refund names none).
	Currency string
	// OrderVersion is the aggregate version of the order's event; 0 for an
	// operator's refund (the callback carries it for information only).
	OrderVersion int64
	// Reason says why an operator asked for the refund; the ledger keeps
	// it, as it keeps the reason an order gives for its own (OUT_OF_STOCK).
	Reason string
	// RequestedBy names the operator (X-Operator) of a refund made at
	// once through the operator's route; the ledger keeps it.
	RequestedBy string
}

// RefundDecision is what becomes of a refund request: made or rejected,
// the payment as the refund leaves it, and what the order service is told.
type RefundDecision struct {
	// Status is RefundSucceeded or RefundRejected.
	Status string
	// Reason says why a refund was rejected (ReasonNoPayment, ...).
	Reason string
	// Currency is the refund's: the request's, else the payment's; empty
	// when neither names one.
	Currency string
	// PaymentID is the payment the refund draws on; empty when the order
	// has none.
	PaymentID string
	// Payment is the payment after a refund that was made; nil when it was
	// rejected.
	Payment *Payment
	// Callback is the callback that reports the outcome to the order
	// service; nil for a refund in no currency (an operator's refund of an
	// order without a payment here): the order service did not ask for it,
	// and a callback in no currency would be refused and retried forever,
	// holding back the order's later callbacks.
	Callback *RefundCallback
}

// RefundCallback is the callback a refund's outcome is reported by.
type RefundCallback struct {
	// Type is rules.CallbackRefundSucceeded or rules.CallbackRefundRejected.
	Type rules.CallbackType
	// PaymentID is the payment the refund drew on, or the one the request
	// named when the order has none here.
	PaymentID string
}

// DecideRefund decides req against p, the order's payment (nil when the
// order has none): the refund is made when it fits what is left of the
// payment, in its currency, and is rejected otherwise, a business outcome
// that is recorded and reported like a refund made. p is not changed.
func DecideRefund(p *Payment, req RefundRequest) RefundDecision {
	d := RefundDecision{Status: RefundSucceeded, Currency: req.Currency}
	var refused error
	if p == nil {
		refused = &RefundError{Reason: ReasonNoPayment, Detail: "order " + req.OrderID + " has no payment"}
	} else {
		d.PaymentID = p.ID
		if d.Currency == "" {
			d.Currency = p.Currency
		}
		after := *p
		if refused = after.Refund(req.Amount, d.Currency); refused == nil {
			d.Payment = &after
		}
	}
	callback := rules.CallbackRefundSucceeded
	var rejection *RefundError
	if errors.As(refused, &rejection) {
		d.Status, d.Reason, callback = RefundRejected, rejection.Reason, rules.CallbackRefundRejected
	}
	if d.Currency != "" {
		d.Callback = &RefundCallback{Type: callback, PaymentID: d.PaymentID}
		if p == nil {
			d.Callback.PaymentID = req.PaymentID
		}
	}
	return d
}
