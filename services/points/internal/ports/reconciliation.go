package ports

import (
	"context"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/points/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
)

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with three statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records *adapters.Repository, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.EntriesOf, reconciliationView)
	admin.RegisterEffects(g, func(ctx context.Context, page admin.EffectsPage) ([]string, error) {
		return records.EffectOrders(ctx, page.After, page.Before, page.Limit)
	})
}

func reconciliationView(orderID string, entries map[string][]points.LedgerEntry, facts admin.ConsumerFacts) pointsapi.ReconciliationView {
	es := entries[orderID]
	v := pointsapi.ReconciliationView{OrderID: orderID, Entries: make([]pointsapi.Entry, len(es)), ConsumerFacts: facts}
	for i, e := range es {
		v.Entries[i] = entry(e)
	}
	return v
}
