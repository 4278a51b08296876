// Package reconciliation decides, from what every service knows about an
// order, whether the services tell the same story, and what to do when they
// do not. It holds the expected state of each service given the order's
// state (the rules the services agreed on), the kinds of finding, and the
// compensation each finding calls for. It knows nothing of HTTP or SQL: the
// adapters read the facts through each service's read-only API, and the
// application takes the actions through each service's own API.
package reconciliation

import (
	"time"

	"github.com/shopspring/decimal"
)

// The services a finding names.
const (
	ServiceOrder        = "order"
	ServicePayment      = "payment"
	ServiceInventory    = "inventory"
	ServicePoints       = "points"
	ServiceNotification = "notification"
)

// Consumers are the services whose dead letters and version guard the facts
// carry.
func Consumers() []string {
	return []string{ServicePayment, ServiceInventory, ServicePoints, ServiceNotification}
}

// Line is a quantity of one SKU.
type Line struct {
	SKU      string
	Quantity int
}

// OrderLine is a line of an order with its price.
type OrderLine struct {
	Line
	UnitPrice decimal.Decimal
}

// Refund is one refund of an order, or a payment it returned, as the order
// service records it.
type Refund struct {
	ID        string
	Kind      string // REFUND or PAYMENT_RETURN
	PaymentID string
	Amount    decimal.Decimal
	Currency  string
	Items     []Line
	Status    string // REQUESTED, SUCCEEDED or REJECTED
	Reason    string
}

// Refund kinds and statuses as the order service reports them.
const (
	KindRefund        = "REFUND"
	KindPaymentReturn = "PAYMENT_RETURN"
	RefundRequested   = "REQUESTED"
	RefundSucceeded   = "SUCCEEDED"
	RefundRejected    = "REJECTED"
)

// OutboxRow is one message a producer (the order service's events, the
// payment service's callbacks) has to deliver.
type OutboxRow struct {
	EventID          string
	EventType        string
	AggregateVersion int64
	Status           string // PENDING or SENT
	Attempts         int
	CreatedAt        time.Time
	NextAttemptAt    time.Time
}

// Order is the order service's view of an order: the source of truth the
// others are compared with.
type Order struct {
	ID             string
	Found          bool
	Status         string
	Version        int64
	Amount         decimal.Decimal
	Currency       string
	CustomerID     string
	Items          []OrderLine
	PaymentID      string
	RefundedAmount decimal.Decimal
	ReturnedItems  []Line
	Refunds        []Refund
	UpdatedAt      time.Time
	Events         []OutboxRow
}

// The order statuses.
const (
	StatusCreated           = "CREATED"
	StatusPendingPayment    = "PENDING_PAYMENT"
	StatusPaid              = "PAID"
	StatusRefunding         = "REFUNDING"
	StatusPartiallyRefunded = "PARTIALLY_REFUNDED"
	StatusRefunded          = "REFUNDED"
	StatusCancelled         = "CANCELLED"
)

// Paid reports whether the order took a payment: every status from PAID
// on, and an order cancelled after it was paid (the stock could not cover
// it, so its money went back).
func (o Order) Paid() bool {
	switch o.Status {
	case StatusPaid, StatusRefunding, StatusPartiallyRefunded, StatusRefunded:
		return true
	case StatusCancelled:
		return o.PaymentID != ""
	}
	return false
}

// pendingRefund returns the refund of the order's money that waits for the
// payment service, or nil.
func (o Order) pendingRefund() *Refund {
	for i, r := range o.Refunds {
		if r.Kind == KindRefund && r.Status == RefundRequested {
			return &o.Refunds[i]
		}
	}
	return nil
}

// returnOf returns the order's return of paymentID, or nil.
func (o Order) returnOf(paymentID string) *Refund {
	for i, r := range o.Refunds {
		if r.Kind == KindPaymentReturn && r.PaymentID == paymentID {
			return &o.Refunds[i]
		}
	}
	return nil
}

// ConsumerState is a consumer's version guard for the order: the last
// applied aggregateVersion and its own state.
type ConsumerState struct {
	Version int64
	State   string
}

// DeadLetter is an outstanding dead letter of the order in one consumer.
type DeadLetter struct {
	ID             int64
	EventID        string
	EventType      string
	ErrorClass     string
	FailureReason  string
	DeadLetteredAt time.Time
	// ReplayedBefore: an earlier dead letter of the same event was
	// replayed, and the event came back.
	ReplayedBefore bool
}

// Payment is the payment service's view of an order.
type Payment struct {
	Found     bool
	PaymentID string
	Amount    decimal.Decimal
	Currency  string
	Status    string
	Refunded  decimal.Decimal
	UpdatedAt time.Time
	Refunds   []PaymentRefund
	Outbox    []OutboxRow
	Consumer  ConsumerState
	Dead      []DeadLetter
}

// PaymentRefund is one refund in the payment service's ledger.
type PaymentRefund struct {
	ID        string
	Amount    decimal.Decimal
	Status    string
	Reason    string
	CreatedAt time.Time
}

// The payment statuses.
const (
	PaymentSucceeded         = "SUCCEEDED"
	PaymentPartiallyRefunded = "PARTIALLY_REFUNDED"
	PaymentRefunded          = "REFUNDED"
)

// Inventory is the inventory service's view of an order.
type Inventory struct {
	Status    string
	Reason    string
	Items     []Line
	Restocked []Line
	UpdatedAt time.Time
	Consumer  ConsumerState
	Dead      []DeadLetter
}

// The inventory statuses.
const (
	InventoryNone               = "NONE"
	InventoryDeducted           = "DEDUCTED"
	InventoryPartiallyRestocked = "PARTIALLY_RESTOCKED"
	InventoryRestocked          = "RESTOCKED"
	InventoryRejected           = "REJECTED"
)

// PointsEntry is one line of the points ledger.
type PointsEntry struct {
	EventID   string
	Type      string // EARN or REVERSAL
	Points    int64
	Amount    decimal.Decimal
	CreatedAt time.Time
}

// Points is the points service's view of an order.
type Points struct {
	Entries  []PointsEntry
	Consumer ConsumerState
	Dead     []DeadLetter
}

// Notice is one notification the customer got.
type Notice struct {
	EventID   string
	Kind      string
	CreatedAt time.Time
}

// Notifications is the notification service's view of an order.
type Notifications struct {
	Sent     []Notice
	Consumer ConsumerState
	Dead     []DeadLetter
}

// Facts is everything the services know about one order.
type Facts struct {
	Order         Order
	Payment       Payment
	Inventory     Inventory
	Points        Points
	Notifications Notifications
}

// deadLetters returns the outstanding dead letters of service.
func (f Facts) deadLetters(service string) []DeadLetter {
	switch service {
	case ServicePayment:
		return f.Payment.Dead
	case ServiceInventory:
		return f.Inventory.Dead
	case ServicePoints:
		return f.Points.Dead
	case ServiceNotification:
		return f.Notifications.Dead
	}
	return nil
}

// LastEffectAt is when the last service's effect on the order was
// committed, as far as the facts show: the end of the order's convergence.
func (f Facts) LastEffectAt() time.Time {
	last := time.Time{}
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	later(f.Payment.UpdatedAt)
	for _, r := range f.Payment.Refunds {
		later(r.CreatedAt)
	}
	if f.Inventory.Status != InventoryNone {
		later(f.Inventory.UpdatedAt)
	}
	for _, e := range f.Points.Entries {
		later(e.CreatedAt)
	}
	for _, n := range f.Notifications.Sent {
		later(n.CreatedAt)
	}
	return last
}
