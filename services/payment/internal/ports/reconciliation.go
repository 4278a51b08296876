package ports

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// Refunds executes an operator's refund through the service's refund path.
type Refunds interface {
	ByOrder(ctx context.Context, orderID string) (payment.Payment, error)
	RefundPayment(ctx context.Context, req payment.RefundRequest) (app.RefundOutcome, error)
}

// ReconciliationView is the payment service's view of one order for the
// reconciliation service: its payment (null if none), the refunds ledger,
// the callbacks to the order service and the refund consumer's facts.
type ReconciliationView struct {
	OrderID string             `json:"orderId"`
	Payment *ReconciledPayment `json:"payment"`
	Refunds []ReconciledRefund `json:"refunds"`
	Outbox  []outbox.Event     `json:"outbox"`
	admin.ConsumerFacts
}

// ReconciledPayment is an order's payment in a ReconciliationView.
type ReconciledPayment struct {
	PaymentID string      `json:"paymentId"`
	Amount    event.Money `json:"amount"`
	Currency  string      `json:"currency"`
	Status    string      `json:"status"`
	Refunded  event.Money `json:"refunded"`
	CreatedAt time.Time   `json:"createdAt"`
	UpdatedAt time.Time   `json:"updatedAt"`
}

// ReconciledRefund is one entry of the refunds ledger in a
// ReconciliationView; Reason says why a REJECTED one was.
type ReconciledRefund struct {
	RefundID  string      `json:"refundId"`
	Amount    event.Money `json:"amount"`
	Currency  string      `json:"currency"`
	Status    string      `json:"status"`
	Reason    string      `json:"reason"`
	CreatedAt time.Time   `json:"createdAt"`
}

// RefundBody is the body of POST /admin/payments/orders/{orderId}/refunds.
// Amount is kept raw so that a number instead of a decimal string gets a
// precise answer.
type RefundBody struct {
	RefundID string          `json:"refundId"`
	Amount   json.RawMessage `json:"amount"`
	// Items are the goods returned with a refund of a payment the order
	// holds, as the order service's refunds take them.
	Items  json.RawMessage `json:"items"`
	Reason string          `json:"reason"`
}

// RefundResponse answers an operator's refund: SUCCEEDED or REJECTED, and
// for a rejection why (NO_PAYMENT, REFUND_EXCEEDS_PAYMENT, ...).
type RefundResponse struct {
	BusinessCode string `json:"businessCode"`
	RefundID     string `json:"refundId"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
	// Message, Amount and OrderStatus are the order service's answer to a
	// refund it recorded (Status REQUESTED) or refused.
	Message     string `json:"message,omitempty"`
	Amount      string `json:"amount,omitempty"`
	OrderStatus string `json:"orderStatus,omitempty"`
}

// RegisterReconciliation adds to the admin group POST
// /reconciliation/orders, the views of up to admin.MaxOrderIDs orders read
// with five statements in one snapshot whatever their number, and GET
// /reconciliation/effects, a page of the orders the service holds effects
// for (reconciliation looks them up at the order service to find orphans).
func RegisterReconciliation(g *echo.Group, records *adapters.Repository, facts *admin.FactsReader) {
	admin.RegisterReconciliation(g, facts, records.Records, reconciliationView)
	admin.RegisterEffects(g, func(ctx context.Context, page admin.EffectsPage) ([]string, error) {
		return records.EffectOrders(ctx, page.After, page.Before, page.Limit)
	})
}

func reconciliationView(orderID string, recs map[string]adapters.OrderRecord, facts admin.ConsumerFacts) ReconciliationView {
	rec := recs[orderID]
	v := ReconciliationView{OrderID: orderID, Refunds: make([]ReconciledRefund, len(rec.Refunds)), Outbox: rec.Outbox, ConsumerFacts: facts}
	if p := rec.Payment; p != nil {
		v.Payment = &ReconciledPayment{PaymentID: p.ID, Amount: event.NewMoney(p.Amount), Currency: p.Currency,
			Status: string(p.Status), Refunded: event.NewMoney(p.Refunded), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
	}
	for i, r := range rec.Refunds {
		v.Refunds[i] = ReconciledRefund{RefundID: r.RefundID, Amount: event.NewMoney(r.Amount), Currency: r.Currency,
			Status: r.Status, Reason: r.Reason, CreatedAt: r.CreatedAt}
	}
	return v
}

// OperatorOrders is what the operator's refund route needs of the order
// service: the order, to see whether it holds the payment, and the refund
// recorded by it.
type OperatorOrders interface {
	Order(ctx context.Context, orderID string) (payment.Order, error)
	RequestRefund(ctx context.Context, orderID string, r adapters.OperatorRefund) (adapters.OrderAnswer, error)
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
		var body RefundBody
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
		return c.JSON(http.StatusOK, RefundResponse{BusinessCode: httpapi.CodeSuccess, RefundID: body.RefundID,
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
func forwardRefund(c echo.Context, orders OperatorOrders, orderID string, body RefundBody, operator string) error {
	r := adapters.OperatorRefund{RefundID: body.RefundID, Items: body.Items, Reason: body.Reason, Operator: operator}
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
	res := RefundResponse{BusinessCode: a.BusinessCode, RefundID: a.RefundID, Message: a.Message, Amount: a.Amount,
		OrderStatus: a.Status}
	if a.BusinessCode == httpapi.CodeSuccess {
		res.Status = StatusRequested
	}
	return c.JSON(http.StatusOK, res)
}
