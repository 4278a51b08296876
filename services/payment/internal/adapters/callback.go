package adapters

import (
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// CallbackPath is where the order service receives callbacks, relative to ORDER_URL.
const CallbackPath = "/payments/callback"

// NewCallback returns a callback of type t with a fresh callback id.
func NewCallback(t rules.CallbackType, orderID, paymentID string, amount decimal.Decimal, currency string) event.Callback {
	return event.Callback{
		CallbackID: event.NewEventID(),
		Type:       t,
		OrderID:    orderID,
		PaymentID:  paymentID,
		Amount:     event.NewMoney(amount),
		Currency:   currency,
	}
}
