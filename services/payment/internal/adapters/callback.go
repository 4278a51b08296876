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

// NewCallback returns a callback of type t with a fresh callback id.
func NewCallback(t event.CallbackType, orderID, paymentID string, amount decimal.Decimal, currency string) event.Callback {
	return event.Callback{
		CallbackID: event.NewEventID(),
		Type:       t,
		OrderID:    orderID,
		PaymentID:  paymentID,
		Amount:     event.NewMoney(amount),
		Currency:   currency,
	}
}

// CallbackMessage turns c into its outbox row, so a callback is written in
// the same transaction as the payment or refund it reports and delivered
// until the order service acknowledges it. orderVersion is the order
// version the callback answers (informational: the relay orders rows of one
// order by insertion).
func CallbackMessage(c event.Callback, orderVersion int64) (outbox.Message, error) {
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
