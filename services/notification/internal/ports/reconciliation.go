package ports

import (
	"context"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Records reads the notifications of many orders, through a snapshot the
// consumer facts are read in too.
type Records interface {
	ListOf(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string][]notification.Sent, error)
}

// Facts reads the consumer's version and dead letters of orders, and
// calls own in the same snapshot.
type Facts interface {
	Read(ctx context.Context, orderIDs []string, own func(q sqlx.QueryerContext) error) (map[string]admin.ConsumerFacts, error)
}

// ReconciledNotification is one notification in a ReconciliationView:
// which event it told the customer of, and when.
type ReconciledNotification struct {
	EventID   string    `json:"eventId"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"createdAt"`
}

// ReconciliationView is the notification service's view of one order for
// the reconciliation service: the notifications sent, oldest first, and
// the consumer's facts.
type ReconciliationView struct {
	OrderID       string                   `json:"orderId"`
	Notifications []ReconciledNotification `json:"notifications"`
	admin.ConsumerFacts
}

// ReconciliationViews answers POST /admin/reconciliation/orders: one view
// per requested id, in the request's order.
type ReconciliationViews struct {
	Orders []ReconciliationView `json:"orders"`
}

// RegisterReconciliation adds POST /reconciliation/orders to the admin
// group: the views of up to admin.MaxOrderIDs orders, read with three
// statements in one snapshot whatever their number.
func RegisterReconciliation(g *echo.Group, records Records, facts Facts) {
	g.POST("/reconciliation/orders", func(c echo.Context) error {
		ids, err := admin.BindOrderIDs(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		var sent map[string][]notification.Sent
		fs, err := facts.Read(ctx, ids, func(q sqlx.QueryerContext) error {
			var err error
			sent, err = records.ListOf(ctx, q, ids)
			return err
		})
		if err != nil {
			return err
		}
		out := ReconciliationViews{Orders: make([]ReconciliationView, len(ids))}
		for i, id := range ids {
			ns := sent[id]
			v := ReconciliationView{OrderID: id, Notifications: make([]ReconciledNotification, len(ns)), ConsumerFacts: fs[id]}
			for j, n := range ns {
				v.Notifications[j] = ReconciledNotification{EventID: n.EventID, Kind: string(n.Kind), CreatedAt: n.CreatedAt}
			}
			out.Orders[i] = v
		}
		return c.JSON(http.StatusOK, out)
	})
}
