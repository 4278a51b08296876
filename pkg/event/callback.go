package event

import (
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Callback is the JSON body the order service receives at POST
// /payments/callback, signed by the payment service, and at POST
// /inventory/callback, signed by the inventory service: one declaration for
// the senders and the receiver (services/order/orderapi names it
// CallbackRequest, and the order service's OpenAPI document is reflected
// from it). Field names are part of the contract.
type Callback struct {
	// CallbackID is the event id of the sender's outbox row: the same for
	// every re-delivery, so it is the order service's idempotency key for
	// the callback.
	CallbackID string             `json:"callbackId"`
	Type       rules.CallbackType `json:"type"`
	OrderID    string             `json:"orderId"`
	PaymentID  string             `json:"paymentId"`
	// Amount is a decimal string with two places ("80.00"). The order
	// service reads it as text, so a missing amount (nil) and a malformed
	// one are rejected by name rather than by the JSON decoder.
	Amount   *string `json:"amount"`
	Currency string  `json:"currency"`
	RefundID string  `json:"refundId,omitempty"`
	Reason   string  `json:"reason,omitempty"`
}

// NewCallback returns a callback of type t with a fresh callback id and
// amount written as Money writes it.
func NewCallback(t rules.CallbackType, orderID, paymentID string, amount decimal.Decimal, currency string) Callback {
	text := NewMoney(amount).String()
	return Callback{CallbackID: NewEventID(), Type: t, OrderID: orderID, PaymentID: paymentID, Amount: &text, Currency: currency}
}
