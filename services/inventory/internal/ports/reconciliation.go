package ports

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
)

// Records is what reconciliation reads of the inventory's database.
type Records interface {
	// Records reads the orders through q, a snapshot the caller reads
	// other tables in too; every id has a record.
	Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]app.OrderRecord, error)
	admin.Effects
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with three statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records Records, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.Records, reconciliationView)
	admin.RegisterEffects(g, records)
}

func reconciliationView(orderID string, recs map[string]app.OrderRecord, facts admin.ConsumerFacts) inventoryapi.ReconciliationView {
	rec := recs[orderID]
	v := inventoryapi.ReconciliationView{OrderID: orderID, Status: string(rec.Status), Reason: rec.Reason,
		Items: lines(rec.Items), Restocked: lines(rec.Restocked), ConsumerFacts: facts}
	if !rec.UpdatedAt.IsZero() {
		v.UpdatedAt = &rec.UpdatedAt
	}
	return v
}
