package ports

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
)

// Records is what reconciliation reads of the service's database.
type Records interface {
	// EntriesOf reads the ledger of orderIDs through q, a snapshot the caller
	// reads other tables in too.
	EntriesOf(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string][]points.LedgerEntry, error)
	admin.Effects
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with three statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records Records, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.EntriesOf, reconciliationView)
	admin.RegisterEffects(g, records)
}

func reconciliationView(orderID string, entries map[string][]points.LedgerEntry, facts admin.ConsumerFacts) pointsapi.ReconciliationView {
	es := entries[orderID]
	v := pointsapi.ReconciliationView{OrderID: orderID, Entries: make([]pointsapi.Entry, len(es)), ConsumerFacts: facts}
	for i, e := range es {
		v.Entries[i] = entry(e)
	}
	return v
}
