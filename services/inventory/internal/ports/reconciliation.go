package ports

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// ReconciliationView is inventory's view of one order for the
// reconciliation service: its state, what it deducted and what refunds
// brought back, when that last changed (absent for NONE), and the
// consumer's facts.
type ReconciliationView struct {
	OrderID   string           `json:"orderId"`
	Status    string           `json:"status"`
	Reason    string           `json:"reason"`
	Items     []inventory.Line `json:"items"`
	Restocked []inventory.Line `json:"restocked"`
	UpdatedAt *time.Time       `json:"updatedAt,omitempty"`
	admin.ConsumerFacts
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with three statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records *adapters.Repository, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.Records, reconciliationView)
	admin.RegisterEffects(g, func(ctx context.Context, page admin.EffectsPage) ([]string, error) {
		return records.EffectOrders(ctx, page.After, page.Before, page.Limit)
	})
}

func reconciliationView(orderID string, recs map[string]adapters.OrderRecord, facts admin.ConsumerFacts) ReconciliationView {
	rec := recs[orderID]
	v := ReconciliationView{OrderID: orderID, Status: string(rec.Status), Reason: rec.Reason,
		Items: lines(rec.Items), Restocked: lines(rec.Restocked), ConsumerFacts: facts}
	if !rec.UpdatedAt.IsZero() {
		v.UpdatedAt = &rec.UpdatedAt
	}
	return v
}
