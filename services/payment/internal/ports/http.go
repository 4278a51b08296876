// Package ports is the payment service's HTTP API: POST /payments,
// GET /payments/orders/{orderId}, GET /admin/outbox/{eventId}, and the
// reconciliation service's view of many orders and its refunds. Every
// error becomes an HTTP answer in MapError, the one place that knows the
// business codes.
package ports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// Business codes of the payment API besides httpapi's shared ones.
const (
	CodeOrderNotFound     = "ORDER_NOT_FOUND"
	CodeOrderNotPayable   = "ORDER_NOT_PAYABLE"
	CodeAmountMismatch    = "AMOUNT_MISMATCH"
	CodePaymentNotFound   = "PAYMENT_NOT_FOUND"
	CodeOrderLookupFailed = "ORDER_SERVICE_UNAVAILABLE"
)

// errOrderLookup marks a failed order look-up that says nothing about the
// order (order service down, 5xx): the client may try again.
var errOrderLookup = errors.New("order look-up failed")

// OrderLookup finds an order in the order service.
type OrderLookup interface {
	Order(ctx context.Context, orderID string) (payment.Order, error)
}

// Payments stores payments.
type Payments interface {
	ByOrder(ctx context.Context, orderID string) (payment.Payment, error)
	Create(ctx context.Context, p payment.Payment, orderVersion int64) (payment.Payment, bool, error)
}

// Handler serves the payment API.
type Handler struct {
	orders   OrderLookup
	payments Payments
}

// NewHandler returns the handlers over their dependencies.
func NewHandler(orders OrderLookup, payments Payments) *Handler {
	return &Handler{orders: orders, payments: payments}
}

// Register adds the public routes to e.
func (h *Handler) Register(e *echo.Echo) {
	e.POST("/payments", h.pay)
	e.GET("/payments/orders/:orderId", h.get)
}

func (h *Handler) pay(c echo.Context) error {
	var body paymentapi.PayRequest
	if err := httpapi.Bind(c, &body); err != nil {
		return err
	}
	amount, err := amountText(body.Amount)
	if err != nil {
		return err
	}
	req, err := payment.NewRequest(body.OrderID, amount, body.Currency)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()

	// A repeat is answered from the payment already made, so it stays a
	// success after the order has moved on to PAID.
	existing, err := h.payments.ByOrder(ctx, req.OrderID)
	switch {
	case err == nil:
		return paid(c, existing, req)
	case !errors.Is(err, payment.ErrPaymentNotFound):
		return err
	}

	// The look-up waits on the order service and uses no connection of
	// this service's pool, so it gives the request's admission slot back
	// meanwhile: holding it made this service shed payments while its
	// database idled (docs/decisions.md, Overload). Shed here, the payment
	// has written nothing.
	var (
		order     payment.Order
		lookupErr error
	)
	if err := httpapi.OutsideSlot(ctx, func() error {
		order, lookupErr = h.orders.Order(ctx, req.OrderID)
		return nil
	}); err != nil {
		return err
	}
	if lookupErr != nil {
		if errors.Is(lookupErr, payment.ErrOrderNotFound) {
			return lookupErr
		}
		return fmt.Errorf("%w: %w", errOrderLookup, lookupErr)
	}
	if err := payment.CheckPayable(order, req); err != nil {
		// A concurrent request for the same order may have paid it, and
		// its callback moved the order on, while this one looked it up:
		// that is a repeat, not a rejection.
		if existing, findErr := h.payments.ByOrder(ctx, req.OrderID); findErr == nil {
			return paid(c, existing, req)
		}
		return err
	}
	stored, _, err := h.payments.Create(ctx, payment.New(req), order.Version)
	if err != nil {
		return err
	}
	return paid(c, stored, req)
}

// paid answers with the order's payment, provided req repeats it.
func paid(c echo.Context, p payment.Payment, req payment.Request) error {
	if err := p.Matches(req); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, paymentapi.PayResponse{BusinessCode: httpapi.CodeSuccess, PaymentID: p.ID})
}

// amountText unwraps the JSON string of amount.
func amountText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return "", rules.Invalid("amount", "is required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", rules.Invalid("amount", `must be a decimal string such as "80.00", not a number`)
	}
	return s, nil
}

func (h *Handler) get(c echo.Context) error {
	p, err := h.payments.ByOrder(c.Request().Context(), c.Param("orderId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, paymentapi.PaymentView{
		OrderID:   p.OrderID,
		PaymentID: p.ID,
		Status:    string(p.Status),
		Amount:    p.Amount.StringFixed(2),
		Refunded:  p.Refunded.StringFixed(2),
		Currency:  p.Currency,
	})
}

// MapError turns the service's errors into HTTP answers: malformed input is
// a 400, unknown ids a 404, business rejections a 200 with their code, a
// failed order look-up a 503 with Retry-After; anything else is left to httpapi (500).
func MapError(err error) *httpapi.Error {
	switch {
	case errors.Is(err, payment.ErrOrderNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeOrderNotFound, Message: err.Error()}
	case errors.Is(err, payment.ErrPaymentNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodePaymentNotFound, Message: err.Error()}
	case errors.Is(err, payment.ErrOrderNotPayable):
		return &httpapi.Error{Status: http.StatusOK, BusinessCode: CodeOrderNotPayable, Message: err.Error()}
	case errors.Is(err, payment.ErrAmountMismatch):
		return &httpapi.Error{Status: http.StatusOK, BusinessCode: CodeAmountMismatch, Message: err.Error()}
	case errors.Is(err, errOrderLookup):
		// Nothing was written, so the client may simply send the payment
		// again, as after the order service's own OVERLOADED.
		return &httpapi.Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeOrderLookupFailed,
			Message: "order service unavailable, try again", Err: err, RetryAfter: httpapi.ShedRetryAfter}
	}
	return nil
}
