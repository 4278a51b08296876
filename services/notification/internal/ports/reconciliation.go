package ports

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
)

// Records is what reconciliation reads of the service's database.
type Records interface {
	// ListOf reads the notifications sent of orderIDs through q, a snapshot the caller
	// reads other tables in too.
	ListOf(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string][]notification.Sent, error)
	admin.Effects
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with three statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records Records, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.ListOf, reconciliationView)
	admin.RegisterEffects(g, records)
}

func reconciliationView(orderID string, sent map[string][]notification.Sent, facts admin.ConsumerFacts) notificationapi.ReconciliationView {
	ns := sent[orderID]
	v := notificationapi.ReconciliationView{OrderID: orderID, Notifications: make([]notificationapi.ReconciledNotification, len(ns)), ConsumerFacts: facts}
	for i, n := range ns {
		v.Notifications[i] = notificationapi.ReconciledNotification{EventID: n.EventID, Kind: string(n.Kind), CreatedAt: n.CreatedAt}
	}
	return v
}
