package app

import (
	"context"
	"errors"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// RefundOutcome is what became of a refund request.
type RefundOutcome struct {
	// Status is payment.RefundSucceeded or payment.RefundRejected.
	Status string
	// Reason says why a refund was rejected.
	Reason string
	// CallbackID is the event id of the callback written; empty when the
	// refund had already been recorded (a repeat with a new event id), or
	// when an operator's refund of an order without a payment has no
	// currency to report it in.
	CallbackID string
}

// Ledger is the storage a refund needs, each call in the unit of work it
// is given: the payment under its row lock, the refunds ledger, and the
// outbox the callback to the order service leaves through.
type Ledger interface {
	// LockPayment returns the payment of orderID, locked until uow ends,
	// or an error wrapping payment.ErrPaymentNotFound.
	LockPayment(ctx context.Context, uow *versionguard.UnitOfWork, orderID string) (payment.Payment, error)
	// RecordedRefund returns the outcome the ledger holds for refundID,
	// if any.
	RecordedRefund(ctx context.Context, uow *versionguard.UnitOfWork, refundID string) (RefundOutcome, bool, error)
	// RecordRefund adds req, decided as d, to the ledger; false when the
	// ledger holds its refund id already (another transaction recorded it
	// meanwhile).
	RecordRefund(ctx context.Context, uow *versionguard.UnitOfWork, req payment.RefundRequest, d payment.RefundDecision) (bool, error)
	// SavePayment stores what has been refunded of p and its status.
	SavePayment(ctx context.Context, uow *versionguard.UnitOfWork, p payment.Payment) error
	// AddCallback writes cb to the outbox in uow, so it is sent once uow
	// has committed.
	AddCallback(ctx context.Context, uow *versionguard.UnitOfWork, cb event.Callback, orderVersion int64) error
	// InUnitOfWork runs fn in a unit of work of its own, for a refund made
	// outside the consumer's.
	InUnitOfWork(ctx context.Context, fn func(*versionguard.UnitOfWork) error) error
	// ByOrder returns the payment of orderID, or an error wrapping
	// payment.ErrPaymentNotFound.
	ByOrder(ctx context.Context, orderID string) (payment.Payment, error)
}

// Refunds makes and rejects refunds: the consumer's for the order's
// requests, and an operator's through the admin API, by one path.
type Refunds struct {
	ledger Ledger
}

// NewRefunds returns the refunds over ledger.
func NewRefunds(ledger Ledger) *Refunds {
	return &Refunds{ledger: ledger}
}

// ByOrder returns the payment of orderID, or an error wrapping
// payment.ErrPaymentNotFound.
func (s *Refunds) ByOrder(ctx context.Context, orderID string) (payment.Payment, error) {
	return s.ledger.ByOrder(ctx, orderID)
}

// RefundPayment makes or rejects req in a transaction of its own, as
// Refund does inside the consumer's: an operator's refund (reconciliation
// returning a payment an order could not take, say) takes the very path
// of the refunds the order service asks for. It is idempotent per refund
// id: a repeat answers the recorded outcome and writes nothing.
func (s *Refunds) RefundPayment(ctx context.Context, req payment.RefundRequest) (RefundOutcome, error) {
	var out RefundOutcome
	err := s.ledger.InUnitOfWork(ctx, func(uow *versionguard.UnitOfWork) error {
		var err error
		out, err = s.Refund(ctx, uow, req)
		return err
	})
	if err != nil {
		return RefundOutcome{}, err
	}
	return out, nil
}

// Refund makes or rejects req in uow (payment.DecideRefund): it records
// the outcome in the refunds ledger, draws the amount from the payment
// when the refund is made, and writes the REFUND_SUCCEEDED or
// REFUND_REJECTED callback. A rejection is a recorded business outcome,
// not an error. A refund id already in the ledger is left as it is and
// answers what it recorded.
func (s *Refunds) Refund(ctx context.Context, uow *versionguard.UnitOfWork, req payment.RefundRequest) (RefundOutcome, error) {
	var held *payment.Payment
	p, err := s.ledger.LockPayment(ctx, uow, req.OrderID)
	switch {
	case err == nil:
		held = &p
	case !errors.Is(err, payment.ErrPaymentNotFound):
		return RefundOutcome{}, err
	}
	if out, found, err := s.ledger.RecordedRefund(ctx, uow, req.RefundID); err != nil || found {
		return out, err
	}
	d := payment.DecideRefund(held, req)
	// The payment's row lock serializes two requests of one refund id, but
	// not when there is no payment: the second record then waits for the
	// first and answers what it recorded.
	recorded, err := s.ledger.RecordRefund(ctx, uow, req, d)
	if err != nil {
		return RefundOutcome{}, err
	}
	if !recorded {
		out, _, err := s.ledger.RecordedRefund(ctx, uow, req.RefundID)
		return out, err
	}
	if d.Payment != nil {
		if err := s.ledger.SavePayment(ctx, uow, *d.Payment); err != nil {
			return RefundOutcome{}, err
		}
	}
	out := RefundOutcome{Status: d.Status, Reason: d.Reason}
	if d.Callback == nil {
		return out, nil
	}
	cb := event.NewCallback(d.Callback.Type, req.OrderID, d.Callback.PaymentID, req.Amount, d.Currency)
	cb.RefundID, cb.Reason = req.RefundID, d.Reason
	if err := s.ledger.AddCallback(ctx, uow, cb, req.OrderVersion); err != nil {
		return RefundOutcome{}, err
	}
	out.CallbackID = cb.CallbackID
	return out, nil
}
