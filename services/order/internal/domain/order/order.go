// Package order is the order aggregate: its lifecycle, the invariants of a
// new order, the event each state change emits and the idempotency rules of
// payment callbacks. It knows nothing of storage, HTTP or Kafka; the
// adapters persist an Order and turn its Events into envelopes.
package order

import (
	"slices"
	"strconv"
	"strings"

	"github.com/shopspring/decimal"
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

// Limits of a new order. They keep a request from producing an order the
// event contract or the NUMERIC(18,2) columns cannot hold.
const (
	MaxItems       = 100
	MaxQuantity    = 1_000_000
	MaxIDLength    = 128
	MaxReasonBytes = 500
	moneyPlaces    = 2
)

// MaxAmount returns the largest order or refund amount: what a
// NUMERIC(18,2) column holds, 9999999999999999.99.
func MaxAmount() decimal.Decimal { return decimal.New(999_999_999_999_999_999, -moneyPlaces) }

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
// The caller emits EventCreated with it.
func New(id, customerID, currency string, items []Item) (*Order, error) {
	if err := ValidateID("orderId", id); err != nil {
		return nil, err
	}
	if err := validateText("customerId", customerID, MaxIDLength); err != nil {
		return nil, err
	}
	if err := ValidateCurrency("currency", currency); err != nil {
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

func validateItems(items []Item) (decimal.Decimal, error) {
	if len(items) == 0 {
		return decimal.Decimal{}, invalid("items", "must contain at least one item")
	}
	if len(items) > MaxItems {
		return decimal.Decimal{}, invalid("items", "has %d entries; at most %d are allowed", len(items), MaxItems)
	}
	seen := make(map[string]int, len(items))
	amount := decimal.Zero
	for i, it := range items {
		field := func(name string) string { return "items[" + strconv.Itoa(i) + "]." + name }
		if err := validateText(field("sku"), it.SKU, MaxIDLength); err != nil {
			return decimal.Decimal{}, err
		}
		if first, dup := seen[it.SKU]; dup {
			return decimal.Decimal{}, invalid(field("sku"), "%q duplicates items[%d].sku; list each SKU once", it.SKU, first)
		}
		seen[it.SKU] = i
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			return decimal.Decimal{}, invalid(field("quantity"), "must be between 1 and %d, got %d", MaxQuantity, it.Quantity)
		}
		if err := ValidateMoney(field("unitPrice"), it.UnitPrice, false); err != nil {
			return decimal.Decimal{}, err
		}
		amount = amount.Add(it.UnitPrice.Mul(decimal.NewFromInt(int64(it.Quantity))))
	}
	if amount.GreaterThan(MaxAmount()) {
		return decimal.Decimal{}, invalid("items", "total amount %s exceeds the maximum %s", amount.StringFixed(moneyPlaces), MaxAmount())
	}
	return amount, nil
}

// ValidateMoney checks that d is a usable amount: not negative (positive
// when positive is set), at most two decimal places, and not above
// MaxAmount.
func ValidateMoney(field string, d decimal.Decimal, positive bool) error {
	switch {
	case positive && !d.IsPositive():
		return invalid(field, "must be greater than zero, got %s", d)
	case d.IsNegative():
		return invalid(field, "must not be negative, got %s", d)
	case !d.Equal(d.Truncate(moneyPlaces)):
		return invalid(field, "must have at most %d decimal places, got %s", moneyPlaces, d)
	case d.GreaterThan(MaxAmount()):
		return invalid(field, "must not exceed %s, got %s", MaxAmount(), d)
	}
	return nil
}

// ValidateID checks an opaque id that appears in URLs and events: 1 to
// MaxIDLength letters, digits or the characters - _ . :
func ValidateID(field, id string) error {
	if id == "" {
		return invalid(field, "is required")
	}
	if len(id) > MaxIDLength {
		return invalid(field, "must be at most %d characters", MaxIDLength)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)
		if !ok {
			return invalid(field, "may contain only letters, digits and - _ . : (got %q)", id)
		}
	}
	return nil
}

// ValidateCurrency checks an ISO 4217 code: three upper-case letters.
func ValidateCurrency(field, currency string) error {
	if currency == "" {
		return invalid(field, "is required")
	}
	if len(currency) != 3 || strings.ToUpper(currency) != currency ||
		strings.IndexFunc(currency, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return invalid(field, "must be 3 upper-case letters (ISO 4217), got %q", currency)
	}
	return nil
}

func validateText(field, s string, maxLen int) error {
	if strings.TrimSpace(s) == "" {
		return invalid(field, "is required")
	}
	if len(s) > maxLen {
		return invalid(field, "must be at most %d characters", maxLen)
	}
	return nil
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
