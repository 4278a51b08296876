// Package order is the order aggregate: its lifecycle, the invariants of a
// new order, the event each state change emits and the idempotency rules of
// payment callbacks. It knows nothing of storage, HTTP or Kafka; the
// adapters persist an Order and turn its Events into envelopes.
package order

import (
	"slices"
	"strconv"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Status is where an order is in its lifecycle (DESIGN §2).
type Status string

// The order statuses.
const (
	StatusCreated        Status = "CREATED"
	StatusPendingPayment Status = "PENDING_PAYMENT"
	StatusPaid           Status = "PAID"
	StatusRefunding      Status = "REFUNDING"
	StatusRefunded       Status = "REFUNDED"
	StatusCancelled      Status = "CANCELLED"
)

// Item is one order line.
type Item struct {
	SKU       string
	Quantity  int
	UnitPrice decimal.Decimal
}

// Order is the aggregate. Version counts its state changes: 1 after
// creation, and one more for each event it emits.
type Order struct {
	ID         string
	CustomerID string
	Currency   string
	Items      []Item
	Amount     decimal.Decimal
	Status     Status
	Version    int64
	PaymentID  string
	// RefundID and RefundAmount describe the latest refund requested; they
	// stay after the refund completes or is rejected, so a repeated refund
	// callback can be recognised.
	RefundID     string
	RefundAmount decimal.Decimal
	// RefundedAmount is what the payment service confirmed as refunded.
	RefundedAmount decimal.Decimal
}

// New validates a new order and returns it in status CREATED, version 1.
// The caller emits EventCreated with it. Every value is checked by the
// contract's rules (pkg/event), the same the consumers enforce, so nothing
// accepted here is refused downstream; a failure is an *event.RuleError.
func New(id, customerID, currency string, items []Item) (*Order, error) {
	if err := event.ValidateID("orderId", id); err != nil {
		return nil, err
	}
	if err := event.ValidateID("customerId", customerID); err != nil {
		return nil, err
	}
	if err := event.ValidateCurrency("currency", currency); err != nil {
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
	}, nil
}

// validateItems checks the lines and returns the order's total. Every unit
// price is positive, so every order, and every refund of its goods, has
// something to pay.
func validateItems(items []Item) (decimal.Decimal, error) {
	if len(items) == 0 {
		return decimal.Decimal{}, event.Invalid("items", "must contain at least one item")
	}
	if len(items) > event.MaxItems {
		return decimal.Decimal{}, event.Invalid("items", "has %d entries; at most %d are allowed", len(items), event.MaxItems)
	}
	seen := make(map[string]int, len(items))
	amount := decimal.Zero
	for i, it := range items {
		field := func(name string) string { return "items[" + strconv.Itoa(i) + "]." + name }
		if err := event.ValidateID(field("sku"), it.SKU); err != nil {
			return decimal.Decimal{}, err
		}
		if first, dup := seen[it.SKU]; dup {
			return decimal.Decimal{}, event.Invalid(field("sku"), "%q duplicates items[%d].sku; list each SKU once", it.SKU, first)
		}
		seen[it.SKU] = i
		if err := event.ValidateQuantity(field("quantity"), it.Quantity); err != nil {
			return decimal.Decimal{}, err
		}
		if err := event.ValidatePositiveAmount(field("unitPrice"), it.UnitPrice); err != nil {
			return decimal.Decimal{}, err
		}
		amount = amount.Add(it.UnitPrice.Mul(decimal.NewFromInt(int64(it.Quantity))))
	}
	if amount.GreaterThan(event.MaxAmount()) {
		return decimal.Decimal{}, event.Invalid("items", "total amount %s exceeds the maximum %s", amount.StringFixed(event.MoneyPlaces), event.MaxAmount())
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
