package app

import (
	"encoding/json"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// PaymentRecord is an order's payment as reconciliation reads it.
type PaymentRecord struct {
	payment.Payment
	UpdatedAt time.Time
}

// RefundRecord is one entry of the refunds ledger: an executed or a
// rejected refund.
type RefundRecord struct {
	RefundID  string
	OrderID   string
	Amount    decimal.Decimal
	Currency  string
	Status    string
	Reason    string
	CreatedAt time.Time
}

// OrderRecord is what the payment service holds of one order: its payment
// (nil if none), its refunds and its callbacks' outbox rows, oldest first.
type OrderRecord struct {
	Payment *PaymentRecord
	Refunds []RefundRecord
	Outbox  []outbox.Event
}

// OperatorRefund is an operator's refund of a payment the order holds, as
// the payment service forwards it to the order service (POST
// /admin/orders/{id}/refunds). Its items travel as the operator sent them,
// unparsed, so the order service is the one to judge them and name what
// is wrong.
type OperatorRefund struct {
	RefundID string
	// Amount is the amount's text, nil when the operator named none.
	Amount *string
	Items  json.RawMessage
	Reason string
	// Operator is who asks (X-Operator).
	Operator string
}
