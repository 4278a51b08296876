package ports

import (
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// parseMoney parses an amount of a request by the contract's rule for a
// positive amount.
func parseMoney(field string, s *string) (decimal.Decimal, error) {
	if s == nil {
		return decimal.Decimal{}, rules.Invalid(field, "is required")
	}
	return rules.ParsePositiveAmount(field, *s)
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

// refundRequest is the body of POST /orders/{id}/refunds: the goods
// returned, the amount given back, or both (the amount defaults to the
// goods' price).
type refundRequest struct {
	Amount *string       `json:"amount"`
	Items  []lineRequest `json:"items"`
}

type lineRequest struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// refund builds the domain's request; the domain checks the lines against
// the order.
func (r refundRequest) refund(id string) (order.RefundRequest, error) {
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

// operatorRefundRequest is the body of POST /admin/orders/{id}/refunds: a
// refund as the customer's, with the refund id the operator's system
// gives it (optional: R-<uuid>) and why.
type operatorRefundRequest struct {
	refundRequest
	RefundID string `json:"refundId"`
	Reason   string `json:"reason"`
}

// fenceRequest is the body of POST /admin/orders/{id}/version: the version
// the order must reach at least.
type fenceRequest struct {
	AtLeast *int64 `json:"atLeast"`
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
		Type:      rules.CallbackType(r.Type),
		OrderID:   r.OrderID,
		PaymentID: r.PaymentID,
		RefundID:  r.RefundID,
		Amount:    amount,
		Currency:  r.Currency,
		Reason:    r.Reason,
	}
	return cb, cb.Validate()
}
