package ports

import (
	"context"
	"errors"
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// Refunds executes an operator's refund through the service's refund path.
type Refunds interface {
	ByOrder(ctx context.Context, orderID string) (payment.Payment, error)
	RefundPayment(ctx context.Context, req payment.RefundRequest) (app.RefundOutcome, error)
}

// Records is what reconciliation reads of the payment service's database.
type Records interface {
	// Records reads the records of orderIDs through q, a snapshot the
	// caller reads other tables in too; every id has a record.
	Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]app.OrderRecord, error)
	admin.Effects
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with five statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records Records, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.Records, reconciliationView)
	admin.RegisterEffects(g, records)
}

func reconciliationView(orderID string, recs map[string]app.OrderRecord, facts admin.ConsumerFacts) paymentapi.ReconciliationView {
	rec := recs[orderID]
	v := paymentapi.ReconciliationView{OrderID: orderID, Refunds: make([]paymentapi.ReconciledRefund, len(rec.Refunds)), Outbox: rec.Outbox, ConsumerFacts: facts}
	if p := rec.Payment; p != nil {
		v.Payment = &paymentapi.ReconciledPayment{PaymentID: p.ID, Amount: event.NewMoney(p.Amount), Currency: p.Currency,
			Status: string(p.Status), Refunded: event.NewMoney(p.Refunded), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	}
	for i, r := range rec.Refunds {
		v.Refunds[i] = paymentapi.ReconciledRefund{RefundID: r.RefundID, Amount: event.NewMoney(r.Amount), Currency: r.Currency,
			Status: r.Status, Reason: r.Reason, CreatedAt: r.CreatedAt}
	}
	return v
}

// OperatorOrders is what the operator's refund route needs of the order
// service: the order, to see whether it holds the payment, and the refund
// recorded by it.
type OperatorOrders interface {
	Order(ctx context.Context, orderID string) (payment.Order, error)
	RequestRefund(ctx context.Context, orderID string, r app.OperatorRefund) (orderapi.Result, error)
}

// StatusRequested is the status of an operator's refund the order service
// has recorded and the refund consumer has yet to execute.
const StatusRequested = "REQUESTED"

// RegisterRefunds adds POST /payments/orders/{orderId}/refunds to the
// admin group: an operator's refund, X-Operator required.
//
// Of a payment the order holds (the order's paymentId is this payment's),
// the refund is the order's to record: it is forwarded to the order
// service (POST /admin/orders/{id}/refunds, with the operator, the amount,
// optional goods and the reason), which asks for it as for a customer's
// refund, so points, stock and the customer's message follow and one set
// of books holds every refund; the answer is REQUESTED, and the refund
// consumer executes it from the order's OrderRefundRequested.
//
// Of a payment no order holds (one reconciliation returns because its order
// could not take it) it is executed here at once, by the refund path the
// order service's refunds take (refunds ledger, payment, callback in one
// transaction), never more than is left of the payment: SUCCEEDED or
// REJECTED; an order without a payment is a REJECTED outcome (NO_PAYMENT),
// not an error; a repeat of a refund id answers the recorded outcome and
// changes nothing.
func RegisterRefunds(g *echo.Group, refunds Refunds, orders OperatorOrders) {
	g.POST("/payments/orders/:orderId/refunds", func(c echo.Context) error {
		orderID := c.Param("orderId")
		if err := rules.ValidateID("orderId", orderID); err != nil {
			return err
		}
		operator, err := admin.Operator(c)
		if err != nil {
			return err
		}
		var body paymentapi.RefundBody
		if err := httpapi.Bind(c, &body); err != nil {
			return err
		}
		if body.RefundID != "" {
			if err := rules.ValidateID("refundId", body.RefundID); err != nil {
				return err
			}
		}
		if err := rules.ValidateReason("reason", body.Reason); err != nil {
			return err
		}
		ctx := c.Request().Context()
		held, err := heldByOrder(ctx, refunds, orders, orderID)
		if err != nil {
			return err
		}
		if held {
			return forwardRefund(c, orders, orderID, body, operator)
		}
		if len(body.Items) > 0 {
			return rules.Invalid("items", "can be returned only with a refund of a payment the order holds")
		}
		if err := rules.ValidateID("refundId", body.RefundID); err != nil {
			return err
		}
		text, err := amountText(body.Amount)
		if err != nil {
			return err
		}
		amount, err := rules.ParsePositiveAmount("amount", text)
		if err != nil {
			return err
		}
		out, err := refunds.RefundPayment(ctx, payment.RefundRequest{
			RefundID: body.RefundID, OrderID: orderID, Amount: amount, Reason: body.Reason, RequestedBy: operator,
		})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, paymentapi.RefundResponse{BusinessCode: httpapi.CodeSuccess, RefundID: body.RefundID,
			Status: out.Status, Reason: out.Reason})
	})
}

// heldByOrder reports whether the order holds the payment the service
// holds for it.
func heldByOrder(ctx context.Context, refunds Refunds, orders OperatorOrders, orderID string) (bool, error) {
	p, err := refunds.ByOrder(ctx, orderID)
	if errors.Is(err, payment.ErrPaymentNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	o, err := orders.Order(ctx, orderID)
	if errors.Is(err, payment.ErrOrderNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return o.PaymentID == p.ID, nil
}

// forwardRefund has the order service record the operator's refund.
func forwardRefund(c echo.Context, orders OperatorOrders, orderID string, body paymentapi.RefundBody, operator string) error {
	r := app.OperatorRefund{RefundID: body.RefundID, Items: body.Items, Reason: body.Reason, Operator: operator}
	if len(body.Amount) > 0 {
		text, err := amountText(body.Amount)
		if err != nil {
			return err
		}
		r.Amount = &text
	}
	a, err := orders.RequestRefund(c.Request().Context(), orderID, r)
	if err != nil {
		return err
	}
	res := paymentapi.RefundResponse{BusinessCode: a.BusinessCode, RefundID: a.RefundID, Message: a.Message, OrderStatus: a.Status}
	if a.Amount != nil {
		res.Amount = a.Amount.String()
	}
	if a.BusinessCode == httpapi.CodeSuccess {
		res.Status = StatusRequested
	}
	return c.JSON(http.StatusOK, res)
}
