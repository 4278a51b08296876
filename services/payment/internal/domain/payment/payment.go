// Package payment holds the payment service's rules: when an order may be
// paid, how a payment request is validated, and how refunds draw down what
// was paid. It knows nothing of HTTP, SQL or Kafka, so the rules are tested
// as plain functions.
package payment

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Status is the state of a payment as GET /payments/orders/{orderId} shows it.
type Status string

// The payment states: a payment starts SUCCEEDED (the simulated provider
// always succeeds) and refunds move it to PARTIALLY_REFUNDED or REFUNDED.
const (
	StatusSucceeded         Status = "SUCCEEDED"
	StatusPartiallyRefunded Status = "PARTIALLY_REFUNDED"
	StatusRefunded          Status = "REFUNDED"
)

// OrderStatusPendingPayment is the only order status a payment is accepted in.
const OrderStatusPendingPayment = "PENDING_PAYMENT"

// Reasons a refund is rejected; they travel in REFUND_REJECTED callbacks.
const (
	ReasonRefundExceedsPayment = "REFUND_EXCEEDS_PAYMENT"
	ReasonNoPayment            = "NO_PAYMENT"
	ReasonCurrencyMismatch     = "CURRENCY_MISMATCH"
	ReasonInvalidRefundAmount  = "INVALID_REFUND_AMOUNT"
)

// Errors the pay flow answers with; the HTTP layer maps each to its
// business code.
var (
	// ErrOrderNotFound means the order service does not know the order.
	ErrOrderNotFound = errors.New("order not found")
	// ErrOrderNotPayable means the order is not waiting for a payment.
	ErrOrderNotPayable = errors.New("order is not payable")
	// ErrAmountMismatch means the request's amount or currency differ from
	// the order's (or from the payment already made for it).
	ErrAmountMismatch = errors.New("amount or currency differ from the order")
	// ErrPaymentNotFound means no payment exists for the order.
	ErrPaymentNotFound = errors.New("payment not found")
)

// Request is a validated payment request.
type Request struct {
	OrderID  string
	Amount   decimal.Decimal
	Currency string
}

// NewRequest validates the raw fields of a payment request by the
// contract's rules (pkg/event), the ones the order service applied when it
// accepted the order, and reports the first one broken as an
// *rules.RuleError.
func NewRequest(orderID, amount, currency string) (Request, error) {
	if err := rules.ValidateID("orderId", orderID); err != nil {
		return Request{}, err
	}
	d, err := rules.ParsePositiveAmount("amount", amount)
	if err != nil {
		return Request{}, err
	}
	if err := rules.ValidateCurrency("currency", currency); err != nil {
		return Request{}, err
	}
	return Request{OrderID: orderID, Amount: d, Currency: currency}, nil
}

// Order is what the payment service learns about an order from the order
// service before it accepts a payment.
type Order struct {
	ID       string
	Status   string
	Version  int64
	Amount   decimal.Decimal
	Currency string
	// PaymentID is the payment the order holds, once paid.
	PaymentID string
}

// CheckPayable says whether r may pay o: the order must wait for payment and
// the request must pay exactly its amount in its currency.
func CheckPayable(o Order, r Request) error {
	if o.Status != OrderStatusPendingPayment {
		return fmt.Errorf("%w: order %s is %s", ErrOrderNotPayable, o.ID, o.Status)
	}
	if !o.Amount.Equal(r.Amount) || o.Currency != r.Currency {
		return fmt.Errorf("%w: order %s is %s %s, request pays %s %s", ErrAmountMismatch,
			o.ID, o.Amount.StringFixed(2), o.Currency, r.Amount.StringFixed(2), r.Currency)
	}
	return nil
}

// Payment is one order's payment and what has been refunded of it.
type Payment struct {
	ID        string
	OrderID   string
	Amount    decimal.Decimal
	Currency  string
	Status    Status
	Refunded  decimal.Decimal
	CreatedAt time.Time
}

// New returns the succeeded payment of r with a fresh payment id.
func New(r Request) Payment {
	return Payment{
		ID:       NewPaymentID(),
		OrderID:  r.OrderID,
		Amount:   r.Amount,
		Currency: r.Currency,
		Status:   StatusSucceeded,
		Refunded: decimal.Zero,
	}
}

// NewPaymentID returns a globally unique payment id.
func NewPaymentID() string { return "P-" + uuid.NewString() }

// Matches reports whether r repeats this payment (same amount and
// currency), which makes paying twice an idempotent success.
func (p Payment) Matches(r Request) error {
	if !p.Amount.Equal(r.Amount) || p.Currency != r.Currency {
		return fmt.Errorf("%w: order %s was paid %s %s, request pays %s %s", ErrAmountMismatch,
			p.OrderID, p.Amount.StringFixed(2), p.Currency, r.Amount.StringFixed(2), r.Currency)
	}
	return nil
}

// Refundable is what may still be refunded.
func (p Payment) Refundable() decimal.Decimal { return p.Amount.Sub(p.Refunded) }

// RefundError is a business rejection of a refund: it is recorded and
// answered with a REFUND_REJECTED callback, never retried.
type RefundError struct {
	Reason string
	Detail string
}

// Error carries the reason code the REFUND_REJECTED callback reports.
func (e *RefundError) Error() string { return "refund rejected: " + e.Reason + ": " + e.Detail }

// Refund draws amount in currency from what is left of the payment. It
// returns a *RefundError, leaving p unchanged, when the refund is not
// possible.
func (p *Payment) Refund(amount decimal.Decimal, currency string) error {
	if err := rules.ValidatePositiveAmount("amount", amount); err != nil {
		return &RefundError{Reason: ReasonInvalidRefundAmount, Detail: err.Error()}
	}
	if currency != p.Currency {
		return &RefundError{Reason: ReasonCurrencyMismatch,
			Detail: fmt.Sprintf("refund in %s of a payment in %s", currency, p.Currency)}
	}
	if amount.GreaterThan(p.Refundable()) {
		return &RefundError{Reason: ReasonRefundExceedsPayment,
			Detail: fmt.Sprintf("refund %s exceeds the refundable %s of payment %s",
				amount.StringFixed(2), p.Refundable().StringFixed(2), p.ID)}
	}
	p.Refunded = p.Refunded.Add(amount)
	if p.Refunded.Equal(p.Amount) {
		p.Status = StatusRefunded
	} else {
		p.Status = StatusPartiallyRefunded
	}
	return nil
}
