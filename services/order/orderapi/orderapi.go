// Package orderapi is the order service's HTTP contract: the bodies its
// routes take and the answers they give. The handlers decode and answer
// these types, the service's OpenAPI document is reflected from them, and
// every client of the service (the payment service, reconciliation, the
// console, scripts/suiteapi, the tests) decodes with them, so each field
// is declared once (docs/decisions.md, The HTTP contract is generated
// from the handlers' types). It imports the kit only, never the service's
// internal packages.
package orderapi

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// CreateRequest is the body of POST /orders; an empty OrderID lets the
// service name the order.
type CreateRequest struct {
	OrderID    string        `json:"orderId"`
	CustomerID string        `json:"customerId"`
	Currency   string        `json:"currency"`
	Items      []ItemRequest `json:"items"`
}

// ItemRequest is an order line of CreateRequest. UnitPrice is a pointer so
// a missing price is told apart from an empty one.
type ItemRequest struct {
	SKU       string  `json:"sku"`
	Quantity  int     `json:"quantity"`
	UnitPrice *string `json:"unitPrice"`
}

// RefundRequest is the body of POST /orders/{id}/refunds: the goods
// returned, the amount given back, or both (the amount defaults to the
// goods' price).
type RefundRequest struct {
	Amount *string       `json:"amount"`
	Items  []LineRequest `json:"items"`
}

// LineRequest is goods a refund returns.
type LineRequest struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// OperatorRefundRequest is the body of POST /admin/orders/{id}/refunds: a
// refund as the customer's, with the refund id the operator's system
// gives it (optional: R-<uuid>) and why.
type OperatorRefundRequest struct {
	RefundRequest
	RefundID string `json:"refundId"`
	Reason   string `json:"reason"`
}

// FenceRequest is the body of POST /admin/orders/{id}/version: the version
// the order must reach at least.
type FenceRequest struct {
	AtLeast *int64 `json:"atLeast"`
}

// CancelRequest is the optional body of POST /orders/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason"`
}

// CallbackRequest is the body of POST /payments/callback and
// /inventory/callback (the signed callbacks of the payment and inventory
// services). It is the kit's event.Callback, which the senders write
// through pkg/outbox: the module of a contract package is one the kit
// cannot import.
type CallbackRequest = event.Callback

// Result answers the order commands: SUCCESS or a named rejection, and
// where the order stands.
type Result struct {
	BusinessCode string       `json:"businessCode"`
	Message      string       `json:"message,omitempty"`
	OrderID      string       `json:"orderId,omitempty"`
	Status       string       `json:"status"`
	Version      int64        `json:"version"`
	Amount       *event.Money `json:"amount,omitempty"`
	RefundID     string       `json:"refundId,omitempty"`
}

// LineView is goods a refund returns.
type LineView struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// ItemView is an order line.
type ItemView struct {
	SKU       string      `json:"sku"`
	Quantity  int         `json:"quantity"`
	UnitPrice event.Money `json:"unitPrice"`
}

// RefundView is one refund of an order, or one payment it returned.
type RefundView struct {
	RefundID  string      `json:"refundId"`
	Kind      string      `json:"kind"`
	PaymentID string      `json:"paymentId"`
	Amount    event.Money `json:"amount"`
	Currency  string      `json:"currency"`
	Items     []LineView  `json:"items"`
	Status    string      `json:"status"`
	Reason    string      `json:"reason,omitempty"`
	// RequestedBy is the operator who asked; absent for the customer.
	RequestedBy string `json:"requestedBy,omitempty"`
}

// OrderView answers GET /orders/{id}; the payment service reads it before
// accepting a payment.
type OrderView struct {
	OrderID        string       `json:"orderId"`
	Status         string       `json:"status"`
	Version        int64        `json:"version"`
	Amount         event.Money  `json:"amount"`
	Currency       string       `json:"currency"`
	CustomerID     string       `json:"customerId"`
	Items          []ItemView   `json:"items"`
	PaymentID      string       `json:"paymentId,omitempty"`
	RefundedAmount event.Money  `json:"refundedAmount"`
	ReturnedItems  []LineView   `json:"returnedItems"`
	Refunds        []RefundView `json:"refunds"`
	// Reason says why the order ended where it is (a cancellation's
	// reason, OUT_OF_STOCK); empty otherwise.
	Reason string `json:"reason,omitempty"`
}

// FenceAnswer answers POST /admin/orders/{id}/version: the order's status
// and version after the fence, and who asked.
type FenceAnswer struct {
	BusinessCode string `json:"businessCode"`
	OrderID      string `json:"orderId"`
	Status       string `json:"status"`
	Version      int64  `json:"version"`
	FencedBy     string `json:"fencedBy"`
}

// Snapshot answers GET /orders/{id}/snapshot: what every service knows
// of the order. A service that cannot be read shows "UNKNOWN" (payment,
// inventory) or -1 (counts).
type Snapshot struct {
	Order         string `json:"order"`
	OrderVersion  int64  `json:"orderVersion"`
	Payment       string `json:"payment"`
	Inventory     string `json:"inventory"`
	PointsLedger  int    `json:"pointsLedger"`
	Notifications int    `json:"notifications"`
	DLQ           int    `json:"dlq"`
	// Converged is reconciliation's verdict: every service has reached
	// what the order's state requires (null: reconciliation unreadable).
	Converged *bool `json:"converged"`
	// Findings counts what reconciliation runs recorded for the order.
	Findings int `json:"findings"`
}

// EventView is one of an order's outbox rows.
type EventView struct {
	EventID          string     `json:"eventId"`
	EventType        string     `json:"eventType"`
	AggregateVersion int64      `json:"aggregateVersion"`
	Status           string     `json:"status"`
	Attempts         int        `json:"attempts"`
	CreatedAt        time.Time  `json:"createdAt"`
	SentAt           *time.Time `json:"sentAt,omitempty"`
}

// EventsView answers GET /orders/{id}/events: the order's outbox rows,
// oldest first.
type EventsView struct {
	OrderID string      `json:"orderId"`
	Count   int         `json:"count"`
	Events  []EventView `json:"events"`
}

// ReconciliationView is the order service's view of one order for the
// reconciliation service, which compares it with what every other service
// knows of the order. Found is false for an order the service never saw,
// and then the view holds nothing else.
type ReconciliationView struct {
	OrderID string `json:"orderId"`
	Found   bool   `json:"found"`
	*ReconciledOrder
}

// ReconciledOrder is what a ReconciliationView holds of a stored order:
// the order as GET /orders/{id} shows it, when it was created and last
// changed, and its outbox rows, oldest first.
type ReconciledOrder struct {
	Status         string         `json:"status"`
	Version        int64          `json:"version"`
	Amount         event.Money    `json:"amount"`
	Currency       string         `json:"currency"`
	CustomerID     string         `json:"customerId"`
	Items          []ItemView     `json:"items"`
	PaymentID      string         `json:"paymentId"`
	RefundedAmount event.Money    `json:"refundedAmount"`
	ReturnedItems  []LineView     `json:"returnedItems"`
	Refunds        []RefundView   `json:"refunds"`
	CreatedAt      time.Time      `json:"createdAt"`
	UpdatedAt      time.Time      `json:"updatedAt"`
	Events         []outbox.Event `json:"events"`
}

// ReconciliationViews answers POST /admin/reconciliation/orders: one view
// per requested id, in the request's order.
type ReconciliationViews struct {
	Orders []ReconciliationView `json:"orders"`
}

// ChangedViews answers GET /admin/reconciliation/orders: a page of orders
// in the order they last changed, and where the next page starts (null
// after the last page).
type ChangedViews struct {
	Orders []ReconciliationView `json:"orders"`
	Next   *PageCursor          `json:"next"`
}

// PageCursor continues GET /admin/reconciliation/orders: the
// changedAfter and afterId of the next request.
type PageCursor struct {
	ChangedAfter string `json:"changedAfter"`
	AfterID      string `json:"afterId"`
}

// UnknownOrders answers POST /admin/reconciliation/unknown-orders: those
// of the requested ids the service does not know, in the request's order.
type UnknownOrders struct {
	OrderIDs []string `json:"orderIds"`
}
