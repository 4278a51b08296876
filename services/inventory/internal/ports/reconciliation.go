package ports

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
)

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

func reconciliationView(orderID string, recs map[string]adapters.OrderRecord, facts admin.ConsumerFacts) inventoryapi.ReconciliationView {
	rec := recs[orderID]
	v := inventoryapi.ReconciliationView{OrderID: orderID, Status: string(rec.Status), Reason: rec.Reason,
		Items: lines(rec.Items), Restocked: lines(rec.Restocked), ConsumerFacts: facts}
	if !rec.UpdatedAt.IsZero() {
		v.UpdatedAt = &rec.UpdatedAt
	}
	return v
}
