// Package order is the order aggregate: its lifecycle, the invariants of a
// new order, the event each state change emits and the idempotency rules of
// payment callbacks. It knows nothing of storage, HTTP or Kafka; the
// adapters persist an Order and turn its Events into envelopes.
package order

import (
	"slices"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Status is where an order is in its lifecycle (docs/design.md, Order
// lifecycle).
type Status string

// The order statuses.
const (
	StatusCreated        Status = "CREATED"
	StatusPendingPayment Status = "PENDING_PAYMENT"
	StatusPaid           Status = "PAID"
	StatusRefunding      Status = "REFUNDING"
	// StatusPartiallyRefunded: some of the amount has been refunded; more
	// refunds may follow until the whole amount is.
	StatusPartiallyRefunded Status = "PARTIALLY_REFUNDED"
	StatusRefunded          Status = "REFUNDED"
	StatusCancelled         Status = "CANCELLED"
)

// Item is one order line.
type Item struct {
	SKU       string
	Quantity  int
	UnitPrice decimal.Decimal
}

// Line is a quantity of one SKU: goods a refund returns.
type Line struct {
	SKU      string
	Quantity int
}

// Order is the aggregate. Version counts its state changes: 1 after
// creation, and one more for each event it emits; a version fence
// (FenceVersion) may raise it past that count, never lower it.
type Order struct {
	ID         string
	CustomerID string
	Currency   string
	Items      []Item
	Amount     decimal.Decimal
	Status     Status
	Version    int64
	PaymentID  string
	// Refunds are the order's refunds and returned payments, oldest
	// first; at most one of each kind is REQUESTED at a time.
	Refunds []Refund
	// Reason says why the order ended where it is: the cancel request's
	// reason, or rules.ReasonOutOfStock once a shortage was reported
	// (from then on the order gives the money back and is cancelled).
	Reason string
}

// RefundKind says what a refund gives back.
type RefundKind string

// The kinds of refund.
const (
	// KindRefund gives back money (and, with it, goods) of a paid order.
	KindRefund RefundKind = "REFUND"
	// KindPaymentReturn gives back a whole payment the order could not
	// take: one that arrived after the order was cancelled, say.
	KindPaymentReturn RefundKind = "PAYMENT_RETURN"
)

// RefundStatus is where a refund stands with the payment service.
type RefundStatus string

// The refund statuses.
const (
	RefundRequested RefundStatus = "REQUESTED"
	RefundSucceeded RefundStatus = "SUCCEEDED"
	RefundRejected  RefundStatus = "REJECTED"
)

// Refund is one refund of the order.
type Refund struct {
	ID        string
	Kind      RefundKind
	PaymentID string
	Amount    decimal.Decimal
	Currency  string
	// Items are the goods it returns; none for money alone.
	Items  []Line
	Status RefundStatus
	// Reason says why a payment was returned, why an operator asked for
	// the refund, or (once rejected) why it was rejected.
	Reason string
	// RequestedBy names the operator who asked for the refund (the
	// X-Operator of the admin route); empty for the customer's.
	RequestedBy string
}

// Clone returns a copy of o that shares nothing with it, so a change can be
// tried on the copy and dropped.
func (o *Order) Clone() *Order {
	c := *o
	c.Items = slices.Clone(o.Items)
	c.Refunds = make([]Refund, len(o.Refunds))
	for i, r := range o.Refunds {
		r.Items = slices.Clone(r.Items)
		c.Refunds[i] = r
	}
	return &c
}

// RefundedAmount is what succeeded refunds of the order's payment gave
// back (returned payments are not the order's money).
func (o *Order) RefundedAmount() decimal.Decimal {
	sum := decimal.Zero
	for _, r := range o.Refunds {
		if r.Kind == KindRefund && r.Status == RefundSucceeded {
			sum = sum.Add(r.Amount)
		}
	}
	return sum
}

// ReturnedItems are the goods succeeded refunds returned, by SKU in the
// order's line order.
func (o *Order) ReturnedItems() []Line {
	returned := map[string]int{}
	for _, r := range o.Refunds {
		if r.Kind == KindRefund && r.Status == RefundSucceeded {
			for _, l := range r.Items {
				returned[l.SKU] += l.Quantity
			}
		}
	}
	out := []Line{}
	for _, it := range o.Items {
		if n := returned[it.SKU]; n > 0 {
			out = append(out, Line{SKU: it.SKU, Quantity: n})
		}
	}
	return out
}

// Refund returns the refund with id, or nil.
func (o *Order) Refund(id string) *Refund {
	for i := range o.Refunds {
		if o.Refunds[i].ID == id {
			return &o.Refunds[i]
		}
	}
	return nil
}

// PendingRefund returns the refund of the order's money that waits for the
// payment service, or nil.
func (o *Order) PendingRefund() *Refund {
	for i := range o.Refunds {
		if o.Refunds[i].Kind == KindRefund && o.Refunds[i].Status == RefundRequested {
			return &o.Refunds[i]
		}
	}
	return nil
}

// returnOf returns the return of paymentID, or nil.
func (o *Order) returnOf(paymentID string) *Refund {
	for i := range o.Refunds {
		if o.Refunds[i].Kind == KindPaymentReturn && o.Refunds[i].PaymentID == paymentID {
			return &o.Refunds[i]
		}
	}
	return nil
}

// New validates a new order and returns it in status CREATED, version 1.
// The caller emits EventCreated with it. Every value is checked by the
// contract's rules (pkg/event), the same the consumers enforce, so nothing
// accepted here is refused downstream; a failure is an *rules.RuleError.
func New(id, customerID, currency string, items []Item) (*Order, error) {
	if err := rules.ValidateID("orderId", id); err != nil {
		return nil, err
	}
	if err := rules.ValidateID("customerId", customerID); err != nil {
		return nil, err
	}
	if err := rules.ValidateCurrency("currency", currency); err != nil {
		return nil, err
	}
	amount, err := validateItems(items)
	if err != nil {
		return nil, err
	}
	return &Order{
		ID:         id,
		CustomerID: customerID,
		Currency:   currency,
		Items:      slices.Clone(items),
		Amount:     amount,
		Status:     StatusCreated,
		Version:    1,
		Refunds:    []Refund{},
	}, nil
}

// validateItems checks the lines and returns the order's total. Every unit
// price is positive, so every order, and every refund of its goods, has
// something to pay.
func validateItems(items []Item) (decimal.Decimal, error) {
	if len(items) == 0 {
		return decimal.Decimal{}, rules.Invalid("items", "must contain at least one item")
	}
	if len(items) > rules.MaxItems {
		return decimal.Decimal{}, rules.Invalid("items", "has %d entries; at most %d are allowed", len(items), rules.MaxItems)
	}
	seen := make(map[string]int, len(items))
	amount := decimal.Zero
	for i, it := range items {
		field := func(name string) string { return "items[" + strconv.Itoa(i) + "]." + name }
		if err := rules.ValidateID(field("sku"), it.SKU); err != nil {
			return decimal.Decimal{}, err
		}
		if first, dup := seen[it.SKU]; dup {
			return decimal.Decimal{}, rules.Invalid(field("sku"), "%q duplicates items[%d].sku; list each SKU once", it.SKU, first)
		}
		seen[it.SKU] = i
		if err := rules.ValidateQuantity(field("quantity"), it.Quantity); err != nil {
			return decimal.Decimal{}, err
		}
		if err := rules.ValidatePositiveAmount(field("unitPrice"), it.UnitPrice); err != nil {
			return decimal.Decimal{}, err
		}
		amount = amount.Add(it.UnitPrice.Mul(decimal.NewFromInt(int64(it.Quantity))))
	}
	if amount.GreaterThan(rules.MaxAmount()) {
		return decimal.Decimal{}, rules.Invalid("items", "total amount %s exceeds the maximum %s", amount.StringFixed(rules.MoneyPlaces), rules.MaxAmount())
	}
	return amount, nil
}

// SameContent reports whether other asks for the same order as o: same
// customer, currency and lines (in any order). A create that repeats an
// existing order is then an idempotent retry rather than a conflict.
func (o *Order) SameContent(other *Order) bool {
	if o.ID != other.ID || o.CustomerID != other.CustomerID || o.Currency != other.Currency || len(o.Items) != len(other.Items) {
		return false
	}
	byID := make(map[string]Item, len(o.Items))
	for _, it := range o.Items {
		byID[it.SKU] = it
	}
	for _, it := range other.Items {
		mine, ok := byID[it.SKU]
		if !ok || mine.Quantity != it.Quantity || !mine.UnitPrice.Equal(it.UnitPrice) {
			return false
		}
	}
	return true
}
