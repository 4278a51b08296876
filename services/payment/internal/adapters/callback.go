package adapters

import (
	"encoding/json"
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// CallbackTopic is the outbox destination name of callback rows; the HTTP sink of
// the payment service's relay delivers every row regardless of topic.
const CallbackTopic = "order-callbacks"

// CallbackPath is where the order service receives callbacks, relative to ORDER_URL.
const CallbackPath = "/payments/callback"

// CallbackType names what a callback reports.
type CallbackType string

// The callback types of the contract.
const (
	CallbackPaymentSucceeded CallbackType = "PAYMENT_SUCCEEDED"
	CallbackRefundSucceeded  CallbackType = "REFUND_SUCCEEDED"
	CallbackRefundRejected   CallbackType = "REFUND_REJECTED"
)

// Callback is the payment → order callback contract: the JSON body the
// order service receives at POST {ORDER_URL}/payments/callback. Its outbox
// row carries it there, so a callback is written in the same transaction as
// the payment or refund it reports and delivered until the order service
// acknowledges it. Field names are part of the contract.
type Callback struct {
	// CallbackID is the event id of the outbox row: the order service's
	// idempotency key for the callback.
	CallbackID string       `json:"callbackId"`
	Type       CallbackType `json:"type"`
	OrderID    string       `json:"orderId"`
	PaymentID  string       `json:"paymentId"`
	Amount     event.Money  `json:"amount"`
	Currency   string       `json:"currency"`
	RefundID   string       `json:"refundId,omitempty"`
	Reason     string       `json:"reason,omitempty"`
}

// NewCallback returns a callback of type t with a fresh callback id.
func NewCallback(t CallbackType, orderID, paymentID string, amount decimal.Decimal, currency string) Callback {
	return Callback{
		CallbackID: event.NewEventID(),
		Type:       t,
		OrderID:    orderID,
		PaymentID:  paymentID,
		Amount:     event.NewMoney(amount),
		Currency:   currency,
	}
}

// Message turns the callback into its outbox row. orderVersion is the order
// version the callback answers (informational: the relay orders rows of one
// order by insertion).
func (c Callback) Message(orderVersion int64) (outbox.Message, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("encode %s callback: %w", c.Type, err)
	}
	return outbox.Message{
		EventID:          c.CallbackID,
		AggregateID:      c.OrderID,
		AggregateVersion: orderVersion,
		EventType:        string(c.Type),
		Topic:            CallbackTopic,
		Payload:          payload,
		Headers: map[string]string{
			event.HeaderEventID:     c.CallbackID,
			event.HeaderEventType:   string(c.Type),
			event.HeaderAggregateID: c.OrderID,
		},
	}, nil
}
