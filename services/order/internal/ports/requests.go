package ports

import (
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
)

// parseMoney parses an amount of a request by the contract's rule for a
// positive amount.
func parseMoney(field string, s *string) (decimal.Decimal, error) {
	if s == nil {
		return decimal.Decimal{}, rules.Invalid(field, "is required")
	}
	return rules.ParsePositiveAmount(field, *s)
}

// newOrder validates the request's shape and builds the order; the domain
// checks the order's invariants.
func newOrder(r orderapi.CreateRequest, newID func() string) (*order.Order, error) {
	if r.Items == nil {
		return nil, rules.Invalid("items", "is required")
	}
	if len(r.Items) > rules.MaxItems {
		return nil, rules.Invalid("items", "has %d entries; at most %d are allowed", len(r.Items), rules.MaxItems)
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

// refundOf builds the domain's request; the domain checks the lines against
// the order.
func refundOf(r orderapi.RefundRequest, id string) (order.RefundRequest, error) {
	req := order.RefundRequest{ID: id}
	if r.Amount == nil && len(r.Items) == 0 {
		return req, rules.Invalid("amount", "or items is required")
	}
	if r.Amount != nil {
		amount, err := parseMoney("amount", r.Amount)
		if err != nil {
			return req, err
		}
		req.Amount = amount
	}
	for _, l := range r.Items {
		req.Items = append(req.Items, order.Line{SKU: l.SKU, Quantity: l.Quantity})
	}
	return req, nil
}

// callbackOf builds the domain's callback and checks it.
func callbackOf(r orderapi.CallbackRequest) (order.Callback, error) {
	amount, err := parseMoney("amount", r.Amount)
	if err != nil {
		return order.Callback{}, err
	}
	cb := order.Callback{
		ID:        r.CallbackID,
		Type:      r.Type,
		OrderID:   r.OrderID,
		PaymentID: r.PaymentID,
		RefundID:  r.RefundID,
		Amount:    amount,
		Currency:  r.Currency,
		Reason:    r.Reason,
	}
	return cb, cb.Validate()
}
