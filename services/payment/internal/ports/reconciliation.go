package ports

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/payment/internal/adapters"
)

// Refunds executes an operator's refund through the service's refund path.
type Refunds interface {
	RefundPayment(ctx context.Context, req adapters.RefundRequest) (adapters.RefundOutcome, error)
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
	Reason   string          `json:"reason"`
}

// RefundResponse answers an operator's refund: SUCCEEDED or REJECTED, and
// for a rejection why (NO_PAYMENT, REFUND_EXCEEDS_PAYMENT, ...).
type RefundResponse struct {
	BusinessCode string `json:"businessCode"`
	RefundID     string `json:"refundId"`
	Status       string `json:"status"`
	Reason       string `json:"reason"`
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

// RegisterRefunds adds POST /payments/orders/{orderId}/refunds to the
// admin group: reconciliation's compensation for money the customer must
// get back, executed by the refund path the order service's refunds take
// (refunds ledger, payment, callback in one transaction), never more than
// is left of the payment. A refund of an order without a payment is a
// REJECTED outcome (NO_PAYMENT), not an error; a repeat of a refund id
// answers the recorded outcome and changes nothing.
func RegisterRefunds(g *echo.Group, refunds Refunds) {
	g.POST("/payments/orders/:orderId/refunds", func(c echo.Context) error {
		orderID := c.Param("orderId")
		if err := event.ValidateID("orderId", orderID); err != nil {
			return err
		}
		var body RefundBody
		if err := httpapi.Bind(c, &body); err != nil {
			return err
		}
		if err := event.ValidateID("refundId", body.RefundID); err != nil {
			return err
		}
		text, err := amountText(body.Amount)
		if err != nil {
			return err
		}
		amount, err := event.ParsePositiveAmount("amount", text)
		if err != nil {
			return err
		}
		if err := event.ValidateReason("reason", body.Reason); err != nil {
			return err
		}
		out, err := refunds.RefundPayment(c.Request().Context(), adapters.RefundRequest{
			RefundID: body.RefundID, OrderID: orderID, Amount: amount, Reason: body.Reason,
		})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, RefundResponse{BusinessCode: httpapi.CodeSuccess, RefundID: body.RefundID,
			Status: out.Status, Reason: out.Reason})
	})
}
