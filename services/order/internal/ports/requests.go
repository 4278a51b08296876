package ports

import (
	"strconv"
	"strings"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// isMoneyText reports whether s is a non-negative decimal string with at
// most two places and no sign, exponent or leading zero: "80", "80.5",
// "80.00". It allows at most 16 integer digits, what NUMERIC(18,2) holds.
func isMoneyText(s string) bool {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if whole == "" || len(whole) > 16 || len(whole) > 1 && whole[0] == '0' || !allDigits(whole) {
		return false
	}
	return !hasFrac || frac != "" && len(frac) <= 2 && allDigits(frac)
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseMoney parses an amount of a request: isMoneyText fixes the accepted
// spelling, event.ParseMoney makes the value.
func parseMoney(field string, s *string) (decimal.Decimal, error) {
	if s == nil || *s == "" {
		return decimal.Decimal{}, httpapi.BadRequest("%s is required", field)
	}
	if !isMoneyText(*s) {
		return decimal.Decimal{}, httpapi.BadRequest(
			`%s must be a non-negative decimal string with at most 2 decimal places, like "80.00" (got %q)`, field, *s)
	}
	m, err := event.ParseMoney(*s)
	if err != nil {
		return decimal.Decimal{}, httpapi.BadRequest("%s: %v", field, err)
	}
	return m.Decimal, nil
}

// createRequest is the body of POST /orders.
type createRequest struct {
	OrderID    string        `json:"orderId"`
	CustomerID string        `json:"customerId"`
	Currency   string        `json:"currency"`
	Items      []itemRequest `json:"items"`
}

type itemRequest struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice *string `json:"unitPrice"`
}

// order validates the request's shape and builds the order; the domain
// checks the order's invariants.
func (r createRequest) order(newID func() string) (*order.Order, error) {
	if r.Items == nil {
		return nil, httpapi.BadRequest("items is required")
	}
	if len(r.Items) > order.MaxItems {
		return nil, httpapi.BadRequest("items has %d entries; at most %d are allowed", len(r.Items), order.MaxItems)
	}
	items := make([]order.Item, len(r.Items))
	for i, it := range r.Items {
		price, err := parseMoney("items["+strconv.Itoa(i)+"].unitPrice", it.UnitPrice)
		if err != nil {
			return nil, err
		}
		items[i] = order.Item{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: price}
	}
	id := r.OrderID
	if id == "" {
		id = newID()
	}
	return order.New(id, r.CustomerID, r.Currency, items)
}

// refundRequest is the body of POST /orders/{id}/refunds.
type refundRequest struct {
	Amount *string `json:"amount"`
}

// cancelRequest is the optional body of POST /orders/{id}/cancel.
type cancelRequest struct {
	Reason string `json:"reason"`
}

// callbackRequest is the body of POST /payments/callback (the order ⇄
// payment contract).
type callbackRequest struct {
	CallbackID string  `json:"callbackId"`
	Type       string  `json:"type"`
	OrderID    string  `json:"orderId"`
	PaymentID  string  `json:"paymentId"`
	Amount     *string `json:"amount"`
	Currency   string  `json:"currency"`
	RefundID   string  `json:"refundId"`
	Reason     string  `json:"reason"`
}

func (r callbackRequest) callback() (order.Callback, error) {
	amount, err := parseMoney("amount", r.Amount)
	if err != nil {
		return order.Callback{}, err
	}
	cb := order.Callback{
		ID:        r.CallbackID,
		Type:      order.CallbackType(r.Type),
		OrderID:   r.OrderID,
		PaymentID: r.PaymentID,
		RefundID:  r.RefundID,
		Amount:    amount,
		Currency:  r.Currency,
		Reason:    r.Reason,
	}
	return cb, cb.Validate()
}
