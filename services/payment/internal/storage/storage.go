// Package storage keeps payments and the refunds ledger in Postgres. Every
// change is written in one transaction with the callback that reports it to
// the order service (an outbox row), so a payment or refund is never
// committed without its callback, nor a callback sent for a rolled-back one.
package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/payment/internal/callback"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// Refund statuses in the ledger.
const (
	RefundSucceeded = "SUCCEEDED"
	RefundRejected  = "REJECTED"
)

// Repository reads and writes the payments database.
type Repository struct {
	db *sqlx.DB
}

// New returns a repository over db.
func New(db *sqlx.DB) *Repository { return &Repository{db: db} }

type paymentRow struct {
	PaymentID string          `db:"payment_id"`
	OrderID   string          `db:"order_id"`
	Amount    decimal.Decimal `db:"amount"`
	Currency  string          `db:"currency"`
	Status    string          `db:"status"`
	Refunded  decimal.Decimal `db:"refunded"`
	CreatedAt time.Time       `db:"created_at"`
}

func (r paymentRow) domain() payment.Payment {
	return payment.Payment{
		ID:        r.PaymentID,
		OrderID:   r.OrderID,
		Amount:    r.Amount,
		Currency:  r.Currency,
		Status:    payment.Status(r.Status),
		Refunded:  r.Refunded,
		CreatedAt: r.CreatedAt,
	}
}

const selectPayment = `
	SELECT payment_id, order_id, amount, currency, status, refunded, created_at
	FROM payments WHERE order_id = $1`

// ByOrder returns the payment of orderID, or an error wrapping
// payment.ErrPaymentNotFound.
func (r *Repository) ByOrder(ctx context.Context, orderID string) (payment.Payment, error) {
	return byOrder(ctx, r.db, orderID, "")
}

func byOrder(ctx context.Context, q sqlx.QueryerContext, orderID, lock string) (payment.Payment, error) {
	var row paymentRow
	err := sqlx.GetContext(ctx, q, &row, selectPayment+lock, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return payment.Payment{}, fmt.Errorf("%w: order %s", payment.ErrPaymentNotFound, orderID)
	}
	if err != nil {
		return payment.Payment{}, fmt.Errorf("read payment of order %s: %w", orderID, err)
	}
	return row.domain(), nil
}

// Create stores p and its PAYMENT_SUCCEEDED callback in one transaction and
// returns p with created = true. When the order already has a payment (a
// repeat, possibly concurrent), it writes nothing and returns the existing
// payment with created = false: one payment and one callback per order.
func (r *Repository) Create(ctx context.Context, p payment.Payment, orderVersion int64) (payment.Payment, bool, error) {
	var (
		stored  payment.Payment
		created bool
	)
	err := postgres.InTx(ctx, r.db, func(tx *sqlx.Tx) error {
		// A concurrent insert of the same order waits for the other
		// transaction here and then does nothing.
		res, err := tx.ExecContext(ctx, `
			INSERT INTO payments (payment_id, order_id, amount, currency, status, refunded)
			VALUES ($1, $2, $3, $4, $5, 0)
			ON CONFLICT (order_id) DO NOTHING`,
			p.ID, p.OrderID, p.Amount, p.Currency, string(p.Status))
		if err != nil {
			return fmt.Errorf("insert payment of order %s: %w", p.OrderID, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("insert payment of order %s: %w", p.OrderID, err)
		}
		if created = n == 1; created {
			cb := callback.New(callback.PaymentSucceeded, p.OrderID, p.ID, p.Amount, p.Currency)
			if err := addCallback(ctx, tx, cb, orderVersion); err != nil {
				return err
			}
		}
		stored, err = byOrder(ctx, tx, p.OrderID, "")
		return err
	})
	if err != nil {
		return payment.Payment{}, false, err
	}
	return stored, created, nil
}

func addCallback(ctx context.Context, tx sqlx.ExecerContext, cb callback.Callback, orderVersion int64) error {
	msg, err := cb.Message(orderVersion)
	if err != nil {
		return err
	}
	return outbox.Add(ctx, tx, msg)
}

// RefundRequest is a refund the order service asked for.
type RefundRequest struct {
	RefundID  string
	OrderID   string
	PaymentID string
	Amount    decimal.Decimal
	Currency  string
	// OrderVersion is the aggregate version of the OrderRefundRequested event.
	OrderVersion int64
}

// RefundOutcome is what became of a refund request.
type RefundOutcome struct {
	// Status is RefundSucceeded or RefundRejected.
	Status string
	// Reason says why a refund was rejected.
	Reason string
	// CallbackID is the event id of the callback written; empty when the
	// refund had already been recorded (a repeat with a new event id).
	CallbackID string
}

// Refund executes or rejects req inside tx, the consumer's transaction: it
// records the outcome in the refunds ledger, draws the amount from the
// payment when it fits, and writes the REFUND_SUCCEEDED or REFUND_REJECTED
// callback. A rejection is a recorded business outcome, not an error. A
// refund id already in the ledger is left as it is.
func (r *Repository) Refund(ctx context.Context, tx *sqlx.Tx, req RefundRequest) (RefundOutcome, error) {
	p, err := byOrder(ctx, tx, req.OrderID, " FOR UPDATE")
	noPayment := errors.Is(err, payment.ErrPaymentNotFound)
	if err != nil && !noPayment {
		return RefundOutcome{}, err
	}
	var existing struct {
		Status string `db:"status"`
		Reason string `db:"reason"`
	}
	err = tx.GetContext(ctx, &existing, `SELECT status, coalesce(reason, '') AS reason FROM refunds WHERE refund_id = $1`, req.RefundID)
	switch {
	case err == nil:
		return RefundOutcome{Status: existing.Status, Reason: existing.Reason}, nil
	case !errors.Is(err, sql.ErrNoRows):
		return RefundOutcome{}, fmt.Errorf("read refund %s: %w", req.RefundID, err)
	}

	var refundErr error
	if noPayment {
		refundErr = &payment.RefundError{Reason: payment.ReasonNoPayment, Detail: "order " + req.OrderID + " has no payment"}
	} else {
		refundErr = p.Refund(req.Amount, req.Currency)
	}
	var rejection *payment.RefundError
	if refundErr != nil && !errors.As(refundErr, &rejection) {
		return RefundOutcome{}, refundErr
	}

	paymentID := sql.NullString{String: p.ID, Valid: !noPayment}
	out := RefundOutcome{Status: RefundSucceeded}
	cbType := callback.RefundSucceeded
	if rejection != nil {
		out = RefundOutcome{Status: RefundRejected, Reason: rejection.Reason}
		cbType = callback.RefundRejected
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO refunds (refund_id, order_id, payment_id, amount, currency, status, reason)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''))`,
		req.RefundID, req.OrderID, paymentID, req.Amount, req.Currency, out.Status, out.Reason); err != nil {
		return RefundOutcome{}, fmt.Errorf("record refund %s: %w", req.RefundID, err)
	}
	if rejection == nil {
		if _, err := tx.ExecContext(ctx, `
			UPDATE payments SET refunded = $2, status = $3, updated_at = now() WHERE payment_id = $1`,
			p.ID, p.Refunded, string(p.Status)); err != nil {
			return RefundOutcome{}, fmt.Errorf("update payment %s: %w", p.ID, err)
		}
	}

	cbPaymentID := p.ID
	if noPayment {
		cbPaymentID = req.PaymentID
	}
	cb := callback.New(cbType, req.OrderID, cbPaymentID, req.Amount, req.Currency)
	cb.RefundID = req.RefundID
	cb.Reason = out.Reason
	if err := addCallback(ctx, tx, cb, req.OrderVersion); err != nil {
		return RefundOutcome{}, err
	}
	out.CallbackID = cb.CallbackID
	return out, nil
}
