package app

import (
	"time"

	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// OrderRecord is inventory's view of an order with when it last changed
// (zero for an order never seen), as reconciliation reads it.
type OrderRecord struct {
	inventory.Order
	UpdatedAt time.Time
}
