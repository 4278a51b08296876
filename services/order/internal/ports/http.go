// Package ports is the order service's HTTP API (README.md, API): the order
// commands and queries, the signed payment callback and the snapshot that
// reads the whole chain.
package ports

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
)

// FailPointAfterCommit fires in the callback handler after the callback's
// transaction committed and before the answer: a crash there makes the
// payment service re-deliver a callback that was already applied.
const FailPointAfterCommit = "order.after-commit"

// Orders is the order service's use cases the handlers call (app.Orders).
// A command returns the order as it stands, also with a business
// rejection, so the answer can say where the order is.
type Orders interface {
	Create(ctx context.Context, o *order.Order) (*order.Order, error)
	Get(ctx context.Context, id string) (*order.Order, error)
	Checkout(ctx context.Context, id string) (*order.Order, error)
	RequestRefund(ctx context.Context, id string, req order.RefundRequest) (*order.Order, error)
	Cancel(ctx context.Context, id, reason string) (*order.Order, error)
	ApplyCallback(ctx context.Context, cb order.Callback) (*order.Order, error)
	FenceVersion(ctx context.Context, id string, atLeast int64) (*order.Order, error)
	Snapshot(ctx context.Context, id string) (app.Snapshot, error)
	Events(ctx context.Context, id string) ([]app.EventRecord, error)
	Records(ctx context.Context, ids []string) (map[string]app.Record, error)
	Unknown(ctx context.Context, ids []string) ([]string, error)
	Changed(ctx context.Context, p app.ChangedPage) ([]app.Record, error)
}

// Handler serves the order API.
type Handler struct {
	orders     Orders
	keys       CallbackKeys
	failPoints *failpoint.Registry
}

// CallbackKeys verify payment callbacks (event.VerifyCallback).
type CallbackKeys struct {
	// Secrets are accepted for verification: CALLBACK_SECRET first, then
	// CALLBACK_SECRET_PREVIOUS while the secret is rotated.
	Secrets [][]byte
	// Window is how far a callback's timestamp may be from now, either way
	// (CALLBACK_REPLAY_WINDOW).
	Window time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// NewHandler returns the API over orders; keys verify payment callbacks;
// failPoints may be nil.
func NewHandler(orders Orders, keys CallbackKeys, failPoints *failpoint.Registry) *Handler {
	if keys.Now == nil {
		keys.Now = time.Now
	}
	return &Handler{orders: orders, keys: keys, failPoints: failPoints}
}

// CallbackPath is where the payment service's callbacks arrive.
const CallbackPath = "/payments/callback"

// StockCallbackPath is where the inventory service's callbacks arrive: a
// paid order the stock could not cover (docs/decisions.md, A shortage is
// compensated). They are signed with the same CALLBACK_SECRET.
const StockCallbackPath = "/inventory/callback"

// callbackTypes are the callbacks each sender may send: a payment service
// cannot report a shortage, nor the inventory service a payment.
var callbackTypes = map[string][]rules.CallbackType{
	CallbackPath:      {rules.CallbackPaymentSucceeded, rules.CallbackRefundSucceeded, rules.CallbackRefundRejected},
	StockCallbackPath: {rules.CallbackStockRejected},
}

// Register adds the routes to srv and the operator routes to admin (the
// server's guarded /admin group). The payment callback is exempt from
// shedding: it completes a payment already taken, the payment service's
// relay bounds how many are in flight, and a shed one would only come back
// later with the order's convergence delayed by the relay's backoff. An
// order's create starts new work, so it is shed before the checkouts and
// payment look-ups of orders already created (docs/decisions.md,
// Overload).
func (h *Handler) Register(srv *httpapi.Server, adminGroup *echo.Group) {
	e := srv.Echo
	e.Use(traceContext)
	e.POST("/orders", h.create)
	srv.Initiating(http.MethodPost, "/orders")
	e.GET("/orders/:id", h.get)
	e.POST("/orders/:id/checkout", h.checkout)
	e.POST("/orders/:id/refunds", h.refund)
	e.POST("/orders/:id/cancel", h.cancel)
	e.GET("/orders/:id/snapshot", h.snapshot)
	e.GET("/orders/:id/events", h.events)
	for path := range callbackTypes {
		e.POST(path, h.callback)
		srv.Exempt(http.MethodPost, path)
	}
	adminGroup.POST("/orders/:id/refunds", h.operatorRefund)
	adminGroup.POST("/orders/:id/version", h.fenceVersion)
	adminGroup.POST("/reconciliation/orders", h.reconcile)
	adminGroup.GET("/reconciliation/orders", h.changed)
	adminGroup.POST("/reconciliation/unknown-orders", h.unknown)
}

func lineViews(ls []order.Line) []orderapi.LineView {
	out := make([]orderapi.LineView, len(ls))
	for i, l := range ls {
		out[i] = orderapi.LineView{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
}

func refundViews(rs []order.Refund) []orderapi.RefundView {
	out := make([]orderapi.RefundView, len(rs))
	for i, r := range rs {
		out[i] = orderapi.RefundView{RefundID: r.ID, Kind: string(r.Kind), PaymentID: r.PaymentID, Amount: event.NewMoney(r.Amount),
			Currency: r.Currency, Items: lineViews(r.Items), Status: string(r.Status), Reason: r.Reason, RequestedBy: r.RequestedBy}
	}
	return out
}

func itemViews(its []order.Item) []orderapi.ItemView {
	out := make([]orderapi.ItemView, len(its))
	for i, it := range its {
		out[i] = orderapi.ItemView{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: event.NewMoney(it.UnitPrice)}
	}
	return out
}

func amount(d decimal.Decimal) *event.Money {
	m := event.NewMoney(d)
	return &m
}

// newID names what a command creates: after the request's Idempotency-Key
// when it has one, so a request that runs again with the same key and body
// (its first run died before its answer was kept, or the key expired)
// finds the order or refund its first run made instead of making another;
// a fresh UUID otherwise.
func newID(c echo.Context, prefix string) string {
	if id, ok := idempotency.DerivedID(c.Request().Context(), prefix); ok {
		return id
	}
	return prefix + uuid.NewString()
}

func (h *Handler) create(c echo.Context) error {
	var req orderapi.CreateRequest
	if err := httpapi.Bind(c, &req); err != nil {
		return err
	}
	o, err := newOrder(req, func() string { return newID(c, "O-") })
	if err != nil {
		return err
	}
	stored, err := h.orders.Create(c.Request().Context(), o)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orderapi.Result{BusinessCode: httpapi.CodeSuccess, OrderID: stored.ID,
		Status: string(stored.Status), Version: stored.Version, Amount: amount(stored.Amount)})
}

func (h *Handler) get(c echo.Context) error {
	o, err := h.orders.Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	v := orderapi.OrderView{
		OrderID: o.ID, Status: string(o.Status), Version: o.Version, Amount: event.NewMoney(o.Amount),
		Currency: o.Currency, CustomerID: o.CustomerID, Items: itemViews(o.Items),
		PaymentID: o.PaymentID, RefundedAmount: event.NewMoney(o.RefundedAmount()),
		ReturnedItems: lineViews(o.ReturnedItems()), Refunds: refundViews(o.Refunds), Reason: o.Reason,
	}
	return c.JSON(http.StatusOK, v)
}

func (h *Handler) checkout(c echo.Context) error {
	o, err := h.orders.Checkout(c.Request().Context(), c.Param("id"))
	code, msg, err := outcome(err)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orderapi.Result{BusinessCode: code, Message: msg, Status: string(o.Status), Version: o.Version, Amount: amount(o.Amount)})
}

func (h *Handler) refund(c echo.Context) error {
	var body orderapi.RefundRequest
	if err := httpapi.Bind(c, &body); err != nil {
		return err
	}
	req, err := refundOf(body, newID(c, "R-"))
	if err != nil {
		return err
	}
	return h.requestRefund(c, req)
}

// operatorRefund answers POST /admin/orders/{id}/refunds: an operator's
// refund (one the payment service's operator route forwards, say), recorded
// by the order under the customer's refund model, with who asked
// (X-Operator, required) and why, so points, stock and the customer's
// message follow as for any refund. A repeat of its refundId asks once.
func (h *Handler) operatorRefund(c echo.Context) error {
	operator, err := admin.Operator(c)
	if err != nil {
		return err
	}
	var body orderapi.OperatorRefundRequest
	if err := httpapi.Bind(c, &body); err != nil {
		return err
	}
	id := body.RefundID
	if id == "" {
		id = "R-" + uuid.NewString()
	}
	req, err := refundOf(body.RefundRequest, id)
	if err != nil {
		return err
	}
	req.Reason, req.RequestedBy = body.Reason, operator
	return h.requestRefund(c, req)
}

// fenceVersion answers POST /admin/orders/{id}/version {"atLeast": n}: the
// version fence of docs/decisions.md (A restore is fenced). It raises the
// order's version to at least n in one transaction, with no event, so the
// order's next change gets a version past every one its consumers have
// applied; a fence at or below the version changes nothing. Who asks
// (X-Operator) is required, as for an operator's refund: reconciliation
// sends its run, a person their name.
func (h *Handler) fenceVersion(c echo.Context) error {
	operator, err := admin.Operator(c)
	if err != nil {
		return err
	}
	var body orderapi.FenceRequest
	if err := httpapi.Bind(c, &body); err != nil {
		return err
	}
	if body.AtLeast == nil {
		return rules.Invalid("atLeast", "is required: the version the order must reach")
	}
	o, err := h.orders.FenceVersion(c.Request().Context(), c.Param("id"), *body.AtLeast)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orderapi.FenceAnswer{BusinessCode: httpapi.CodeSuccess, OrderID: o.ID, Status: string(o.Status), Version: o.Version,
		FencedBy: operator})
}

// requestRefund asks for req on the order and answers where it stands.
func (h *Handler) requestRefund(c echo.Context, req order.RefundRequest) error {
	o, err := h.orders.RequestRefund(c.Request().Context(), c.Param("id"), req)
	code, msg, err := outcome(err)
	if err != nil {
		return err
	}
	res := orderapi.Result{BusinessCode: code, Message: msg, Status: string(o.Status), Version: o.Version}
	if r := o.Refund(req.ID); code == httpapi.CodeSuccess && r != nil {
		res.RefundID, res.Amount = r.ID, amount(r.Amount)
	}
	return c.JSON(http.StatusOK, res)
}

func (h *Handler) cancel(c echo.Context) error {
	var req orderapi.CancelRequest
	if err := httpapi.BindOptional(c, &req); err != nil {
		return err
	}
	o, err := h.orders.Cancel(c.Request().Context(), c.Param("id"), req.Reason)
	code, msg, err := outcome(err)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, orderapi.Result{BusinessCode: code, Message: msg, Status: string(o.Status), Version: o.Version})
}

// callback applies a payment callback. The signature is checked over the
// timestamp and the raw body before anything else, so an unsigned or
// replayed-too-late request changes nothing; a copy inside the window is
// deduplicated by its callbackId like any re-delivery.
func (h *Handler) callback(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var tooLarge *echo.HTTPError
		if errors.As(err, &tooLarge) {
			return tooLarge
		}
		return httpapi.BadRequest("read body: %v", err)
	}
	hdr := c.Request().Header
	if err := event.VerifyCallback(h.keys.Secrets, body, hdr.Get(event.SignatureTimestampHeader), hdr.Get(event.SignatureHeader),
		h.keys.Now(), h.keys.Window); err != nil {
		return err
	}
	var req orderapi.CallbackRequest
	if err := httpapi.Decode(body, &req); err != nil {
		return err
	}
	cb, err := callbackOf(req)
	if err != nil {
		return err
	}
	if !slices.Contains(callbackTypes[c.Path()], cb.Type) {
		return rules.Invalid("type", "%s is not a callback %s accepts", cb.Type, c.Path())
	}
	o, err := h.orders.ApplyCallback(c.Request().Context(), cb)
	code, msg, err := outcome(err)
	if err != nil {
		return err
	}
	if r := returnOf(o, cb); r != nil {
		// Accepted, and the money goes back: the same answer however often
		// the callback comes.
		code, msg = CodePaymentRejected, fmt.Sprintf("order %s cannot take payment %s (%s): it is returned by refund %s",
			o.ID, r.PaymentID, r.Reason, r.ID)
	}
	if code == httpapi.CodeSuccess {
		if err := h.failPoints.Inject(FailPointAfterCommit); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, orderapi.Result{BusinessCode: code, Message: msg, Status: string(o.Status), Version: o.Version})
}

// returnOf returns the order's return of the payment cb reports, if the
// order could not take it.
func returnOf(o *order.Order, cb order.Callback) *order.Refund {
	if cb.Type != rules.CallbackPaymentSucceeded {
		return nil
	}
	for i := range o.Refunds {
		if r := &o.Refunds[i]; r.Kind == order.KindPaymentReturn && r.PaymentID == cb.PaymentID {
			return r
		}
	}
	return nil
}

// snapshot shows the order and what every other service knows about it.
// A service that cannot be read shows "UNKNOWN" (payment, inventory) or -1
// (counts) instead of failing the whole snapshot.
func (h *Handler) snapshot(c echo.Context) error {
	s, err := h.orders.Snapshot(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	o, v := s.Order, s.Peers
	return c.JSON(http.StatusOK, orderapi.Snapshot{
		Order: string(o.Status), OrderVersion: o.Version, Payment: v.Payment, Inventory: v.Inventory,
		PointsLedger: v.PointsLedger, Notifications: v.Notifications, DLQ: v.DLQ, Converged: v.Converged, Findings: v.Findings,
	})
}

// events lists the order's outbox rows, so a drill can see which events
// exist and whether the relay has sent them.
func (h *Handler) events(c echo.Context) error {
	id := c.Param("id")
	records, err := h.orders.Events(c.Request().Context(), id)
	if err != nil {
		return err
	}
	out := orderapi.EventsView{OrderID: id, Count: len(records), Events: make([]orderapi.EventView, len(records))}
	for i, r := range records {
		out.Events[i] = orderapi.EventView{EventID: r.EventID, EventType: r.EventType, AggregateVersion: r.AggregateVersion,
			Status: r.Status, Attempts: r.Attempts, CreatedAt: r.CreatedAt, SentAt: r.SentAt}
	}
	return c.JSON(http.StatusOK, out)
}

// traceContext continues the caller's W3C trace: the traceparent header,
// or X-traceparent as the payment service's callback relay sends it. The
// trace id then reaches the events written and the log lines.
func traceContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		tp := req.Header.Get("traceparent")
		if tp == "" {
			tp = req.Header.Get("X-" + event.HeaderTraceparent)
		}
		if id, ok := traceID(tp); ok {
			c.SetRequest(req.WithContext(observability.WithEvent(req.Context(), id, "")))
		}
		return next(c)
	}
}

// traceID extracts the trace id of a version-00 traceparent.
func traceID(traceparent string) (string, bool) {
	parts := strings.Split(strings.TrimSpace(traceparent), "-")
	if len(parts) != 4 || len(parts[0]) != 2 || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return "", false
	}
	id := parts[1]
	notLowerHex := func(r rune) bool { return !strings.ContainsRune("0123456789abcdef", r) }
	if strings.Trim(id, "0") == "" || strings.ContainsFunc(id, notLowerHex) {
		return "", false
	}
	return id, true
}
