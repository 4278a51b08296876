// Package inventoryapi is the inventory service's HTTP contract: the
// bodies its routes take and the answers they give. The handlers decode
// and answer these types, the service's OpenAPI document is reflected
// from them, and the service's clients (reconciliation, the console,
// scripts/suiteapi, the tests) decode with them (docs/decisions.md, The
// HTTP contract is generated from the handlers' types). It imports the kit
// only, never the service's internal packages.
package inventoryapi

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/admin"
)

// StockResponse answers GET and PUT /inventory/{sku}.
type StockResponse struct {
	BusinessCode string `json:"businessCode,omitempty"`
	SKU          string `json:"sku"`
	Available    int    `json:"available"`
	Deducted     int    `json:"deducted"`
}

// SetStockRequest is the body of PUT /inventory/{sku}. Available is a
// pointer so a missing field is told apart from zero.
type SetStockRequest struct {
	Available *int `json:"available"`
}

// Line is a quantity of one SKU.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// OrderResponse answers GET /inventory/orders/{orderId}: the order's
// state, what it deducted and what refunds brought back.
type OrderResponse struct {
	OrderID   string `json:"orderId"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
	Items     []Line `json:"items"`
	Restocked []Line `json:"restocked"`
}

// Movement is one stock movement in MovementsResponse.
type Movement struct {
	EventID   string    `json:"eventId"`
	SKU       string    `json:"sku"`
	Delta     int       `json:"delta"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"createdAt"`
}

// MovementsResponse answers GET /inventory/orders/{orderId}/movements.
type MovementsResponse struct {
	OrderID   string     `json:"orderId"`
	Count     int        `json:"count"`
	Movements []Movement `json:"movements"`
}

// ReconciliationView is inventory's view of one order for the
// reconciliation service (POST /admin/reconciliation/orders): its state,
// what it deducted and what refunds brought back, when that last changed
// (absent for NONE), and the consumer's facts.
type ReconciliationView struct {
	OrderID   string     `json:"orderId"`
	Status    string     `json:"status"`
	Reason    string     `json:"reason"`
	Items     []Line     `json:"items"`
	Restocked []Line     `json:"restocked"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
	admin.ConsumerFacts
}
