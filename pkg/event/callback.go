package event

import "github.com/reliable-orders/fulfillment/pkg/rules"

// Callback is the JSON body the order service receives at POST
// /payments/callback, signed by the payment service, and at POST
// /inventory/callback, signed by the inventory service. Field names are
// part of the contract.
type Callback struct {
	// CallbackID is the event id of the payment service's outbox row: the
	// same for every re-delivery, so it is the order service's idempotency
	// key for the callback.
	CallbackID string             `json:"callbackId"`
	Type       rules.CallbackType `json:"type"`
	OrderID    string             `json:"orderId"`
	PaymentID  string             `json:"paymentId"`
	Amount     Money              `json:"amount"`
	Currency   string             `json:"currency"`
	RefundID   string             `json:"refundId,omitempty"`
	Reason     string             `json:"reason,omitempty"`
}
