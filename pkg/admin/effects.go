package admin

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// EffectsPage asks a service for a page of the orders it holds effects for
// (payments, stock deductions, ledger entries, notifications): those after
// the order id After, in order id order, whose effects were last written
// before Before, at most Limit of them. Reconciliation looks each one up
// at the order service: an effect for an order it does not know is an
// orphan.
type EffectsPage struct {
	After  string
	Before time.Time
	Limit  int
}

// EffectOrders answers GET /admin/reconciliation/effects: a page of order
// ids, and Next, the after of the next page ("" on the last one).
type EffectOrders struct {
	OrderIDs []string `json:"orderIds"`
	Next     string   `json:"next"`
}

// Effects lists the orders a service holds effects for: up to limit
// order ids after after, ascending, whose effects were last written before
// before. A service's repository implements it.
type Effects interface {
	EffectOrders(ctx context.Context, after string, before time.Time, limit int) ([]string, error)
}

// BindEffectsPage reads the query of GET /admin/reconciliation/effects,
// the same in every service: before (RFC 3339, required: an effect
// written a moment ago may belong to an order in flight), after (an order
// id, optional) and limit (1 to MaxOrderIDs, default MaxOrderIDs). A broken
// rule is an *rules.RuleError naming the parameter, which pkg/httpapi
// answers with 400 INVALID_REQUEST.
func BindEffectsPage(c echo.Context) (EffectsPage, error) {
	page := EffectsPage{After: c.QueryParam("after"), Limit: MaxOrderIDs}
	if page.After != "" {
		if err := rules.ValidateID("after", page.After); err != nil {
			return EffectsPage{}, err
		}
	}
	before := c.QueryParam("before")
	t, err := time.Parse(time.RFC3339Nano, before)
	if err != nil {
		return EffectsPage{}, rules.Invalid("before", "must be a time like 2026-12-01T10:00:00Z, got %q", before)
	}
	page.Before = t
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxOrderIDs {
			return EffectsPage{}, rules.Invalid("limit", "must be a whole number from 1 to %d, got %q", MaxOrderIDs, s)
		}
		page.Limit = n
	}
	return page, nil
}

// RegisterEffects adds GET /reconciliation/effects to a service's admin
// group: a page of the order ids it holds effects for, listed by effects.
func RegisterEffects(g *echo.Group, effects Effects) {
	g.GET("/reconciliation/effects", func(c echo.Context) error {
		page, err := BindEffectsPage(c)
		if err != nil {
			return err
		}
		ids, err := effects.EffectOrders(c.Request().Context(), page.After, page.Before, page.Limit)
		if err != nil {
			return err
		}
		out := EffectOrders{OrderIDs: ids}
		if out.OrderIDs == nil {
			out.OrderIDs = []string{}
		}
		if len(ids) == page.Limit {
			out.Next = ids[len(ids)-1]
		}
		return c.JSON(http.StatusOK, out)
	})
}
