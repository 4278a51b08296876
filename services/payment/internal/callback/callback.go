// Package callback is the payment → order callback contract: the JSON body
// the order service receives at POST {ORDER_URL}/payments/callback, and the
// outbox row that carries it there, so a callback is written in the same
// transaction as the payment or refund it reports and delivered until the
// order service acknowledges it.
package callback

import (
	"encoding/json"
	"fmt"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// Topic is the outbox destination name of callback rows; the HTTP sink of
// the payment service's relay delivers every row regardless of topic.
const Topic = "order-callbacks"

// Path is where the order service receives callbacks, relative to ORDER_URL.
const Path = "/payments/callback"

// Type names what a callback reports.
type Type string

// The callback types of the contract.
const (
	PaymentSucceeded Type = "PAYMENT_SUCCEEDED"
	RefundSucceeded  Type = "REFUND_SUCCEEDED"
	RefundRejected   Type = "REFUND_REJECTED"
)

// Callback is the body of one callback. Field names are part of the
// contract with the order service.
type Callback struct {
	// CallbackID is the event id of the outbox row: the order service's
	// idempotency key for the callback.
	CallbackID string      `json:"callbackId"`
	Type       Type        `json:"type"`
	OrderID    string      `json:"orderId"`
	PaymentID  string      `json:"paymentId"`
	Amount     event.Money `json:"amount"`
	Currency   string      `json:"currency"`
	RefundID   string      `json:"refundId,omitempty"`
	Reason     string      `json:"reason,omitempty"`
}

// New returns a callback of type t with a fresh callback id.
func New(t Type, orderID, paymentID string, amount decimal.Decimal, currency string) Callback {
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
		Topic:            Topic,
		Payload:          payload,
		Headers: map[string]string{
			event.HeaderEventID:     c.CallbackID,
			event.HeaderEventType:   string(c.Type),
			event.HeaderAggregateID: c.OrderID,
		},
	}, nil
}
