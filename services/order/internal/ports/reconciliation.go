package ports

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// DefaultPageLimit is how many orders GET /admin/reconciliation/orders
// answers when the request names no limit.
const DefaultPageLimit = 500

// ReconciliationView is the order service's view of one order for the
// reconciliation service, which compares it with what every other service
// knows of the order. Found is false for an order the service never saw,
// and then the view holds nothing else.
type ReconciliationView struct {
	OrderID string `json:"orderId"`
	Found   bool   `json:"found"`
	*ReconciledOrder
}

// ReconciledOrder is what a ReconciliationView holds of a stored order:
// the order as GET /orders/{id} shows it, when it was created and last
// changed, and its outbox rows, oldest first.
type ReconciledOrder struct {
	Status         order.Status   `json:"status"`
	Version        int64          `json:"version"`
	Amount         event.Money    `json:"amount"`
	Currency       string         `json:"currency"`
	CustomerID     string         `json:"customerId"`
	Items          []itemView     `json:"items"`
	PaymentID      string         `json:"paymentId"`
	RefundedAmount event.Money    `json:"refundedAmount"`
	ReturnedItems  []lineView     `json:"returnedItems"`
	Refunds        []refundView   `json:"refunds"`
	CreatedAt      time.Time      `json:"createdAt"`
	UpdatedAt      time.Time      `json:"updatedAt"`
	Events         []outbox.Event `json:"events"`
}

// ReconciliationViews answers POST /admin/reconciliation/orders: one view
// per requested id, in the request's order.
type ReconciliationViews struct {
	Orders []ReconciliationView `json:"orders"`
}

// ChangedViews answers GET /admin/reconciliation/orders: a page of orders
// in the order they last changed, and where the next page starts (null
// after the last page).
type ChangedViews struct {
	Orders []ReconciliationView `json:"orders"`
	Next   *PageCursor          `json:"next"`
}

// PageCursor continues GET /admin/reconciliation/orders: the
// changedAfter and afterId of the next request.
type PageCursor struct {
	ChangedAfter string `json:"changedAfter"`
	AfterID      string `json:"afterId"`
}

func reconciliationView(rec app.Record) ReconciliationView {
	o := rec.Order
	v := &ReconciledOrder{
		Status: o.Status, Version: o.Version, Amount: event.NewMoney(o.Amount), Currency: o.Currency,
		CustomerID: o.CustomerID, Items: make([]itemView, len(o.Items)), PaymentID: o.PaymentID,
		RefundedAmount: event.NewMoney(o.RefundedAmount()), ReturnedItems: lineViews(o.ReturnedItems()),
		Refunds: refundViews(o.Refunds), CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Events: rec.Events,
	}
	for i, it := range o.Items {
		v.Items[i] = itemView{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: event.NewMoney(it.UnitPrice)}
	}
	return ReconciliationView{OrderID: o.ID, Found: true, ReconciledOrder: v}
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
	out := ReconciliationViews{Orders: make([]ReconciliationView, len(ids))}
	for i, id := range ids {
		if rec, ok := recs[id]; ok {
			out.Orders[i] = reconciliationView(rec)
		} else {
			out.Orders[i] = ReconciliationView{OrderID: id}
		}
	}
	return c.JSON(http.StatusOK, out)
}

// UnknownOrders answers POST /admin/reconciliation/unknown-orders: those
// of the requested ids the service does not know, in the request's order.
type UnknownOrders struct {
	OrderIDs []string `json:"orderIds"`
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
	return c.JSON(http.StatusOK, UnknownOrders{OrderIDs: unknown})
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
	out := ChangedViews{Orders: make([]ReconciliationView, len(recs))}
	for i, rec := range recs {
		out.Orders[i] = reconciliationView(rec)
	}
	if len(recs) == p.Limit {
		last := recs[len(recs)-1]
		out.Next = &PageCursor{ChangedAfter: last.UpdatedAt.Format(time.RFC3339Nano), AfterID: last.Order.ID}
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
