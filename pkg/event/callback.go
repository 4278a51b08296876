package event

// CallbackType names what a callback reports: the payment service tells
// the order service of a payment or a refund, and the inventory service of
// a paid order the stock could not cover, through callbacks, the second
// contract of the suite beside the order events.
type CallbackType string

// The callback types.
const (
	CallbackPaymentSucceeded CallbackType = "PAYMENT_SUCCEEDED"
	CallbackRefundSucceeded  CallbackType = "REFUND_SUCCEEDED"
	CallbackRefundRejected   CallbackType = "REFUND_REJECTED"
	// CallbackStockRejected: the inventory service could not deduct a
	// paid order's goods; the order gives the customer's money back
	// (docs/decisions.md, A shortage is compensated).
	CallbackStockRejected CallbackType = "STOCK_REJECTED"
)

// Callback is the JSON body the order service receives at POST
// /payments/callback, signed by the payment service, and at POST
// /inventory/callback, signed by the inventory service. Field names are
// part of the contract.
type Callback struct {
	// CallbackID is the event id of the payment service's outbox row: the
	// same for every re-delivery, so it is the order service's idempotency
	// key for the callback.
	CallbackID string       `json:"callbackId"`
	Type       CallbackType `json:"type"`
	OrderID    string       `json:"orderId"`
	PaymentID  string       `json:"paymentId"`
	Amount     Money        `json:"amount"`
	Currency   string       `json:"currency"`
	RefundID   string       `json:"refundId,omitempty"`
	Reason     string       `json:"reason,omitempty"`
}
