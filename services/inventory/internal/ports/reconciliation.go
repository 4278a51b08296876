package ports

import (
	"context"
	"net/http"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// Records reads inventory's view of many orders, through a snapshot the
// consumer facts are read in too.
type Records interface {
	Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]adapters.OrderRecord, error)
}

// Facts reads the consumer's version and dead letters of orders, and
// calls own in the same snapshot.
type Facts interface {
	Read(ctx context.Context, orderIDs []string, own func(q sqlx.QueryerContext) error) (map[string]admin.ConsumerFacts, error)
}

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
		var recs map[string]adapters.OrderRecord
		fs, err := facts.Read(ctx, ids, func(q sqlx.QueryerContext) error {
			var err error
			recs, err = records.Records(ctx, q, ids)
			return err
		})
		if err != nil {
			return err
		}
		out := ReconciliationViews{Orders: make([]ReconciliationView, len(ids))}
		for i, id := range ids {
			rec := recs[id]
			v := ReconciliationView{OrderID: id, Status: string(rec.Status), Reason: rec.Reason,
				Items: lines(rec.Items), Restocked: lines(rec.Restocked), ConsumerFacts: fs[id]}
			if !rec.UpdatedAt.IsZero() {
				v.UpdatedAt = &rec.UpdatedAt
			}
			out.Orders[i] = v
		}
		return c.JSON(http.StatusOK, out)
	})
}
