// Package paymentapi is the payment service's HTTP contract: the bodies
// its routes take and the answers they give. The handlers decode and
// answer these types, the service's OpenAPI document is reflected from
// them, and the service's clients (reconciliation, the console,
// scripts/suiteapi, the tests) decode with them (docs/decisions.md, The
// HTTP contract is generated from the handlers' types). It imports the kit
// only, never the service's internal packages.
package paymentapi

import (
	"encoding/json"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// PayRequest is the body of POST /payments. Amount is kept raw so that a
// number instead of a decimal string gets a precise answer; a client
// sends a JSON string (Amount), and leaves it out rather than send null.
type PayRequest struct {
	OrderID  string          `json:"orderId"`
	Amount   json.RawMessage `json:"amount,omitempty"`
	Currency string          `json:"currency"`
}

// PayResponse answers an accepted POST /payments.
type PayResponse struct {
	BusinessCode string `json:"businessCode"`
	PaymentID    string `json:"paymentId"`
}

// PaymentView answers GET /payments/orders/{orderId}.
type PaymentView struct {
	OrderID   string `json:"orderId"`
	PaymentID string `json:"paymentId"`
	Status    string `json:"status"`
	Amount    string `json:"amount"`
	Refunded  string `json:"refunded"`
	Currency  string `json:"currency"`
}

// RefundBody is the body of POST /admin/payments/orders/{orderId}/refunds.
// Amount is kept raw so that a number instead of a decimal string gets a
// precise answer; a client sends a JSON string (Amount). A client leaves
// out what it does not send: a raw null counts as sent.
type RefundBody struct {
	RefundID string          `json:"refundId,omitempty"`
	Amount   json.RawMessage `json:"amount,omitempty"`
	// Items are the goods returned with a refund of a payment the order
	// holds, as the order service's refunds take them
	// ([]orderapi.LineRequest).
	Items  json.RawMessage `json:"items,omitempty"`
	Reason string          `json:"reason"`
}

// RefundResponse answers an operator's refund: SUCCEEDED or REJECTED, and
// for a rejection why (NO_PAYMENT, REFUND_EXCEEDS_PAYMENT, ...).
type RefundResponse struct {
	BusinessCode string `json:"businessCode"`
	RefundID     string `json:"refundId"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
	// Message, Amount and OrderStatus are the order service's answer to a
	// refund it recorded (Status REQUESTED) or refused.
	Message     string `json:"message,omitempty"`
	Amount      string `json:"amount,omitempty"`
	OrderStatus string `json:"orderStatus,omitempty"`
}

// ReconciliationView is the payment service's view of one order for the
// reconciliation service (POST /admin/reconciliation/orders): its payment
// (null if none), the refunds ledger, the callbacks to the order service
// and the refund consumer's facts.
type ReconciliationView struct {
	OrderID string             `json:"orderId"`
	Payment *ReconciledPayment `json:"payment"`
	Refunds []ReconciledRefund `json:"refunds"`
	Outbox  []outbox.Event     `json:"outbox"`
	admin.ConsumerFacts
}

// ReconciledPayment is an order's payment in a ReconciliationView.
type ReconciledPayment struct {
	PaymentID string      `json:"paymentId"`
	Amount    event.Money `json:"amount"`
	Currency  string      `json:"currency"`
	Status    string      `json:"status"`
	Refunded  event.Money `json:"refunded"`
	CreatedAt time.Time   `json:"createdAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
}

// ReconciledRefund is one entry of the refunds ledger in a
// ReconciliationView; Reason says why a REJECTED one was.
type ReconciledRefund struct {
	RefundID  string      `json:"refundId"`
	Amount    event.Money `json:"amount"`
	Currency  string      `json:"currency"`
	Status    string      `json:"status"`
	Reason    string      `json:"reason"`
	CreatedAt time.Time   `json:"createdAt"`
}

// Amount is the JSON of an amount as PayRequest and RefundBody take it: a
// decimal string such as "80.00".
func Amount(s string) json.RawMessage {
	raw, _ := json.Marshal(s) // a string always marshals
	return raw
}
