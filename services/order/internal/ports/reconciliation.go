package ports

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
)

// DefaultPageLimit is how many orders GET /admin/reconciliation/orders
// answers when the request names no limit.
const DefaultPageLimit = 500

func reconciliationView(rec app.Record) orderapi.ReconciliationView {
	o := rec.Order
	v := &orderapi.ReconciledOrder{
		Status: string(o.Status), Version: o.Version, Amount: event.NewMoney(o.Amount), Currency: o.Currency,
		CustomerID: o.CustomerID, Items: itemViews(o.Items), PaymentID: o.PaymentID,
		RefundedAmount: event.NewMoney(o.RefundedAmount()), ReturnedItems: lineViews(o.ReturnedItems()),
		Refunds: refundViews(o.Refunds), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Events: rec.Events,
	}
	return orderapi.ReconciliationView{OrderID: o.ID, Found: true, ReconciledOrder: v}
}

// reconcile answers the views of the requested orders, read with three
// statements however many there are.
func (h *Handler) reconcile(c echo.Context) error {
	ids, err := admin.BindOrderIDs(c)
	if err != nil {
		return err
	}
	recs, err := h.orders.Records(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	out := orderapi.ReconciliationViews{Orders: make([]orderapi.ReconciliationView, len(ids))}
	for i, id := range ids {
		if rec, ok := recs[id]; ok {
			out.Orders[i] = reconciliationView(rec)
		} else {
			out.Orders[i] = orderapi.ReconciliationView{OrderID: id}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// unknown answers which of the requested orders the service never saw,
// with one statement: reconciliation's look-up of the orders the other
// services hold effects for, which needs no view of those it knows.
func (h *Handler) unknown(c echo.Context) error {
	ids, err := admin.BindOrderIDs(c)
	if err != nil {
		return err
	}
	unknown, err := h.orders.Unknown(c.Request().Context(), ids)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orderapi.UnknownOrders{OrderIDs: unknown})
}

// changed answers a page of the orders that changed in a window, so a
// reconciliation pass can walk every order changed since its last pass.
func (h *Handler) changed(c echo.Context) error {
	p, err := changedPage(c)
	if err != nil {
		return err
	}
	recs, err := h.orders.Changed(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := orderapi.ChangedViews{Orders: make([]orderapi.ReconciliationView, len(recs))}
	for i, rec := range recs {
		out.Orders[i] = reconciliationView(rec)
	}
	if len(recs) == p.Limit {
		last := recs[len(recs)-1]
		out.Next = &orderapi.PageCursor{ChangedAfter: last.UpdatedAt.Format(time.RFC3339Nano), AfterID: last.Order.ID}
	}
	return c.JSON(http.StatusOK, out)
}

// changedPage reads the page GET /admin/reconciliation/orders asks for;
// a malformed parameter is an *rules.RuleError naming it.
func changedPage(c echo.Context) (app.ChangedPage, error) {
	p := app.ChangedPage{Limit: DefaultPageLimit}
	var err error
	if p.After, err = queryTime(c, "changedAfter"); err != nil {
		return p, err
	}
	if p.Before, err = queryTime(c, "changedBefore"); err != nil {
		return p, err
	}
	if p.AfterID = c.QueryParam("afterId"); p.AfterID != "" {
		if err := rules.ValidateID("afterId", p.AfterID); err != nil {
			return p, err
		}
	}
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > admin.MaxOrderIDs {
			return p, rules.Invalid("limit", "must be a whole number from 1 to %d", admin.MaxOrderIDs)
		}
		p.Limit = n
	}
	return p, nil
}

// queryTime reads an optional RFC 3339 time parameter; absent is zero.
func queryTime(c echo.Context, name string) (time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, rules.Invalid(name, "must be an RFC 3339 time such as 2026-01-02T15:04:05.123456Z")
	}
	return t.UTC(), nil
}
