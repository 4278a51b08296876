package outbox

import (
	"encoding/json"
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// CallbackTopic is the destination name of callback rows: an HTTP sink
// delivers every row of its relay whatever its topic, so the name only
// tells a reader of the outbox what a row is.
const CallbackTopic = "order-callbacks"

// CallbackMessage turns c into its outbox row, so a callback to the order
// service is written in the same transaction as the fact it reports (a
// payment, a refund, a shortage) and delivered until the order service
// acknowledges it. orderVersion is the order version the callback answers
// (informational: the relay orders rows of one order by insertion).
func CallbackMessage(c event.Callback, orderVersion int64) (Message, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return Message{}, fmt.Errorf("encode %s callback: %w", c.Type, err)
	}
	return Message{
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
