// Package adapters connects the payment service to the outside world:
// payments and the refunds ledger in Postgres (the ledger the refunds of
// internal/app decide over, app.Ledger), each change written in one
// transaction with the callback that reports it to the order service (an
// outbox row, so a payment or refund is never committed without its
// callback, nor a callback sent for a rolled-back one); the callback
// contract; and the order service's API.
package adapters

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/payment/internal/app"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// Repository reads and writes the payments database.
type Repository struct {
	db    *sqlx.DB
	relay RelayWaker
}

// RelayWaker is the callback relay of the service (outbox.Relay), woken
// once a transaction that added callbacks to the outbox has committed.
type RelayWaker interface{ Wake() }

// NewRepository returns a repository over db. relay may be nil; without
// it the callbacks leave at the relay's next poll.
func NewRepository(db *sqlx.DB, relay RelayWaker) *Repository {
	return &Repository{db: db, relay: relay}
}

// committed wakes the relay for the callbacks a committed transaction
// added.
func (r *Repository) committed() {
	if r.relay != nil {
		r.relay.Wake()
	}
}

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
		// transaction here and then does nothing, and returns no row. The
		// new payment comes back from the insert itself: a payment is one
		// statement and its callback another.
		var row paymentRow
		err := sqlx.GetContext(ctx, tx, &row, `
			INSERT INTO payments (payment_id, order_id, amount, currency, status, refunded)
			VALUES ($1, $2, $3, $4, $5, 0)
			ON CONFLICT (order_id) DO NOTHING
			RETURNING payment_id, order_id, amount, currency, status, refunded, created_at`,
			p.ID, p.OrderID, p.Amount, p.Currency, string(p.Status))
		if errors.Is(err, sql.ErrNoRows) {
			stored, err = byOrder(ctx, tx, p.OrderID, "")
			return err
		}
		if err != nil {
			return fmt.Errorf("insert payment of order %s: %w", p.OrderID, err)
		}
		created, stored = true, row.domain()
		cb := event.NewCallback(rules.CallbackPaymentSucceeded, p.OrderID, p.ID, p.Amount, p.Currency)
		return addCallback(ctx, tx, cb, orderVersion)
	})
	if err != nil {
		return payment.Payment{}, false, err
	}
	if created {
		r.committed()
	}
	return stored, created, nil
}

func addCallback(ctx context.Context, tx sqlx.ExecerContext, cb event.Callback, orderVersion int64) error {
	msg, err := outbox.CallbackMessage(cb, orderVersion)
	if err != nil {
		return err
	}
	return outbox.Add(ctx, tx, msg)
}

// LockPayment returns the payment of orderID, locked until uow ends, or an
// error wrapping payment.ErrPaymentNotFound.
func (r *Repository) LockPayment(ctx context.Context, uow *versionguard.UnitOfWork, orderID string) (payment.Payment, error) {
	return byOrder(ctx, uow.Tx(), orderID, " FOR UPDATE")
}

// RecordedRefund returns the outcome the ledger holds for refundID, if any.
func (r *Repository) RecordedRefund(ctx context.Context, uow *versionguard.UnitOfWork, refundID string) (app.RefundOutcome, bool, error) {
	var existing struct {
		Status string `db:"status"`
		Reason string `db:"reason"`
	}
	err := uow.Tx().GetContext(ctx, &existing, `SELECT status, coalesce(reason, '') AS reason FROM refunds WHERE refund_id = $1`, refundID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return app.RefundOutcome{}, false, nil
	case err != nil:
		return app.RefundOutcome{}, false, fmt.Errorf("read refund %s: %w", refundID, err)
	}
	return app.RefundOutcome{Status: existing.Status, Reason: existing.Reason}, true, nil
}

// RecordRefund adds req, decided as d, to the refunds ledger, and reports
// false when the ledger holds its refund id already: the insert of a
// refund whose order has no payment to lock waits for a concurrent one of
// the same id and then adds nothing.
func (r *Repository) RecordRefund(ctx context.Context, uow *versionguard.UnitOfWork, req payment.RefundRequest, d payment.RefundDecision) (bool, error) {
	paymentID := sql.NullString{String: d.PaymentID, Valid: d.PaymentID != ""}
	res, err := uow.Tx().ExecContext(ctx, `
		INSERT INTO refunds (refund_id, order_id, payment_id, amount, currency, status, reason, requested_reason, requested_by)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $8, $9)
		ON CONFLICT (refund_id) DO NOTHING`,
		req.RefundID, req.OrderID, paymentID, req.Amount, d.Currency, d.Status, d.Reason, req.Reason, req.RequestedBy)
	if err != nil {
		return false, fmt.Errorf("record refund %s: %w", req.RefundID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record refund %s: %w", req.RefundID, err)
	}
	return n == 1, nil
}

// SavePayment stores what has been refunded of p and its status.
func (r *Repository) SavePayment(ctx context.Context, uow *versionguard.UnitOfWork, p payment.Payment) error {
	if _, err := uow.Tx().ExecContext(ctx, `
		UPDATE payments SET refunded = $2, status = $3, updated_at = now() WHERE payment_id = $1`,
		p.ID, p.Refunded, string(p.Status)); err != nil {
		return fmt.Errorf("update payment %s: %w", p.ID, err)
	}
	return nil
}

// AddCallback writes cb to the outbox in uow, and wakes the relay once
// uow has committed (the consumer's, or InUnitOfWork's).
func (r *Repository) AddCallback(ctx context.Context, uow *versionguard.UnitOfWork, cb event.Callback, orderVersion int64) error {
	if err := addCallback(ctx, uow.Tx(), cb, orderVersion); err != nil {
		return err
	}
	uow.AfterCommit(r.committed)
	return nil
}

// InUnitOfWork runs fn in a unit of work of its own over the payments
// database, for a refund made outside the consumer's: the relay is woken
// once it has committed the callbacks fn added.
func (r *Repository) InUnitOfWork(ctx context.Context, fn func(*versionguard.UnitOfWork) error) error {
	return versionguard.InUnitOfWork(ctx, r.db, fn)
}

// refundRow is one row of the refunds ledger.
type refundRow struct {
	RefundID  string          `db:"refund_id"`
	OrderID   string          `db:"order_id"`
	Amount    decimal.Decimal `db:"amount"`
	Currency  string          `db:"currency"`
	Status    string          `db:"status"`
	Reason    string          `db:"reason"`
	CreatedAt time.Time       `db:"created_at"`
}

// Records reads the records of orderIDs through q with three statements,
// whatever their number; q is a snapshot the caller reads other tables in
// too. Every id has a record, empty for an order the service never saw;
// times are in UTC.
func (r *Repository) Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]app.OrderRecord, error) {
	var payments []struct {
		paymentRow
		UpdatedAt time.Time `db:"updated_at"`
	}
	if err := sqlx.SelectContext(ctx, q, &payments, `
		SELECT payment_id, order_id, amount, currency, status, refunded, created_at, updated_at
		FROM payments WHERE order_id = ANY($1)`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read payments of %d orders: %w", len(orderIDs), err)
	}
	var refunds []refundRow
	if err := sqlx.SelectContext(ctx, q, &refunds, `
		SELECT refund_id, order_id, amount, currency, status, coalesce(reason, '') AS reason, created_at
		FROM refunds WHERE order_id = ANY($1) ORDER BY created_at, refund_id`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read refunds of %d orders: %w", len(orderIDs), err)
	}
	rows, err := outbox.ForAggregates(ctx, q, orderIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]app.OrderRecord, len(orderIDs))
	for _, id := range orderIDs {
		events := rows[id]
		if events == nil {
			events = []outbox.Event{}
		}
		out[id] = app.OrderRecord{Refunds: []app.RefundRecord{}, Outbox: events}
	}
	for _, p := range payments {
		rec := out[p.OrderID]
		d := p.domain()
		d.CreatedAt = d.CreatedAt.UTC()
		rec.Payment = &app.PaymentRecord{Payment: d, UpdatedAt: p.UpdatedAt.UTC()}
		out[p.OrderID] = rec
	}
	for _, rf := range refunds {
		rec := out[rf.OrderID]
		rf.CreatedAt = rf.CreatedAt.UTC()
		rec.Refunds = append(rec.Refunds, app.RefundRecord(rf))
		out[rf.OrderID] = rec
	}
	return out, nil
}

// EffectOrders lists up to limit order ids after after, ascending, that
// the service holds a payment for, last written before before: what
// reconciliation looks up at the order service to find orphans.
func (r *Repository) EffectOrders(ctx context.Context, after string, before time.Time, limit int) ([]string, error) {
	ids := []string{}
	if err := r.db.SelectContext(ctx, &ids, `
		SELECT order_id FROM payments
		WHERE order_id > $1 AND updated_at < $2
		ORDER BY order_id LIMIT $3`, after, before, limit); err != nil {
		return nil, fmt.Errorf("list orders with payments: %w", err)
	}
	return ids, nil
}
