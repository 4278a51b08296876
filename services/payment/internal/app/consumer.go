// Package app executes the refunds the order service asks for: it
// consumes OrderRefundRequested (a refund of a paid order) and
// OrderPaymentRejected (a payment the order could not take, returned in
// full) from order-events and, in one transaction with the event's dedup
// row and version guard, records the refund's outcome and the callback
// that reports it.
package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// FailPoint makes apply fail on demand, so tests and drills can exercise the
// consumer's retries and dead-lettering.
const FailPoint = "payment.apply"

// StateRefundHandled is the consumer's state for an order once a refund
// request has been executed or rejected; a later refund request (after a
// rejection put the order back to PAID) is handled from it again.
const StateRefundHandled = "REFUND_HANDLED"

// Transitions is the consumer's state machine: only refunds matter to the
// payment service, and an order may ask for several.
func (c *Consumer) Transitions() versionguard.Transitions {
	from := []string{versionguard.InitialState, StateRefundHandled}
	return versionguard.Transitions{
		event.OrderRefundRequested: from,
		event.OrderPaymentRejected: from,
	}
}

// Refunder makes or rejects a refund in the consumer's unit of work
// (Refunds).
type Refunder interface {
	Refund(ctx context.Context, uow *versionguard.UnitOfWork, req payment.RefundRequest) (RefundOutcome, error)
}

// Consumer is the payment consumer's apply function and transition table.
type Consumer struct {
	refunds    Refunder
	failPoints *failpoint.Registry
	logger     *slog.Logger
}

// NewConsumer returns a consumer over refunds; failPoints may be nil.
func NewConsumer(refunds Refunder, failPoints *failpoint.Registry, logger *slog.Logger) *Consumer {
	return &Consumer{refunds: refunds, failPoints: failPoints, logger: logger}
}

// Apply executes the refund env requests. A refund that cannot be made is a
// business rejection recorded in the ledger (with its callback) and returns
// no error, so it is never retried; errors are database failures, retried
// by the router up to its bound.
func (c *Consumer) Apply(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
	if err := c.failPoints.Inject(FailPoint); err != nil {
		return "", err
	}
	req, err := refundOf(env)
	if err != nil {
		return "", err
	}
	out, err := c.refunds.Refund(ctx, uow, req)
	if err != nil {
		return "", fmt.Errorf("refund %s of order %s: %w", req.RefundID, env.AggregateID, err)
	}
	c.logger.InfoContext(ctx, "refund handled", "orderId", env.AggregateID, "refundId", req.RefundID,
		"eventType", env.EventType, "status", out.Status, "reason", out.Reason, "callbackId", out.CallbackID)
	return StateRefundHandled, nil
}

// refundOf reads the refund an event asks for: part of a paid order's
// payment, or the whole of a payment the order could not take.
func refundOf(env event.Envelope) (payment.RefundRequest, error) {
	req := payment.RefundRequest{OrderID: env.AggregateID, OrderVersion: env.AggregateVersion}
	switch env.EventType {
	case event.OrderRefundRequested:
		var d event.OrderRefundRequestedData
		if err := env.DecodeData(&d); err != nil {
			return req, err
		}
		req.RefundID, req.PaymentID, req.Amount, req.Currency = d.RefundID, d.PaymentID, d.Amount.Decimal, d.Currency
		req.Reason = d.Reason
	case event.OrderPaymentRejected:
		var d event.OrderPaymentRejectedData
		if err := env.DecodeData(&d); err != nil {
			return req, err
		}
		req.RefundID, req.PaymentID, req.Amount, req.Currency = d.RefundID, d.PaymentID, d.Amount.Decimal, d.Currency
	default:
		return req, fmt.Errorf("no refund in %s", env.EventType)
	}
	return req, nil
}
