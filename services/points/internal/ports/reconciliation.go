package ports

import (
	"context"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// Records reads the ledger of many orders, through a snapshot the
// consumer facts are read in too.
type Records interface {
	EntriesOf(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string][]points.LedgerEntry, error)
}

// Facts reads the consumer's version and dead letters of orders, and
// calls own in the same snapshot.
type Facts interface {
	Read(ctx context.Context, orderIDs []string, own func(q sqlx.QueryerContext) error) (map[string]admin.ConsumerFacts, error)
}

// ReconciliationView is the points service's view of one order for the
// reconciliation service: its ledger entries, in the order they were
// applied (their points add up to what the order is worth,
// event.PointsFor), and the consumer's facts.
type ReconciliationView struct {
	OrderID string  `json:"orderId"`
	Entries []Entry `json:"entries"`
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
		var entries map[string][]points.LedgerEntry
		fs, err := facts.Read(ctx, ids, func(q sqlx.QueryerContext) error {
			var err error
			entries, err = records.EntriesOf(ctx, q, ids)
			return err
		})
		if err != nil {
			return err
		}
		out := ReconciliationViews{Orders: make([]ReconciliationView, len(ids))}
		for i, id := range ids {
			es := entries[id]
			v := ReconciliationView{OrderID: id, Entries: make([]Entry, len(es)), ConsumerFacts: fs[id]}
			for j, e := range es {
				v.Entries[j] = entry(e)
			}
			out.Orders[i] = v
		}
		return c.JSON(http.StatusOK, out)
	})
}
