// Package adapters connects the payment service to the outside world:
// payments and the refunds ledger in Postgres, each change written in one
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
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/payment/internal/domain/payment"
)

// Refund statuses in the ledger.
const (
	RefundSucceeded = "SUCCEEDED"
	RefundRejected  = "REJECTED"
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
			cb := NewCallback(rules.CallbackPaymentSucceeded, p.OrderID, p.ID, p.Amount, p.Currency)
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

// RefundRequest is a refund the order service asked for, or an operator
// (reconciliation) through the admin API.
type RefundRequest struct {
	RefundID  string
	OrderID   string
	PaymentID string
	Amount    decimal.Decimal
	// Currency is the refund's; empty means the payment's (an operator's
	// refund names none).
	Currency string
	// OrderVersion is the aggregate version of the OrderRefundRequested
	// event; 0 for an operator's refund (the callback carries it for
	// information only).
	OrderVersion int64
	// Reason says why an operator asked for the refund; the ledger keeps
	// it, as it keeps the reason an order gives for its own (OUT_OF_STOCK).
	Reason string
	// RequestedBy names the operator (X-Operator) of a refund made at
	// once through the operator's route; the ledger keeps it.
	RequestedBy string
}

// RefundOutcome is what became of a refund request.
type RefundOutcome struct {
	// Status is RefundSucceeded or RefundRejected.
	Status string
	// Reason says why a refund was rejected.
	Reason string
	// CallbackID is the event id of the callback written; empty when the
	// refund had already been recorded (a repeat with a new event id), or
	// when an operator's refund of an order without a payment has no
	// currency to report it in.
	CallbackID string
}

// recordedRefund returns the outcome the ledger holds for refundID, if any.
func recordedRefund(ctx context.Context, tx *sqlx.Tx, refundID string) (RefundOutcome, bool, error) {
	var existing struct {
		Status string `db:"status"`
		Reason string `db:"reason"`
	}
	err := tx.GetContext(ctx, &existing, `SELECT status, coalesce(reason, '') AS reason FROM refunds WHERE refund_id = $1`, refundID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return RefundOutcome{}, false, nil
	case err != nil:
		return RefundOutcome{}, false, fmt.Errorf("read refund %s: %w", refundID, err)
	}
	return RefundOutcome{Status: existing.Status, Reason: existing.Reason}, true, nil
}

// RefundPayment executes or rejects req in a transaction of its own, as
// Refund does inside the consumer's: an operator's refund (reconciliation
// returning a payment an order could not take, say) takes the very path
// of the refunds the order service asks for. It is idempotent per refund
// id: a repeat answers the recorded outcome and writes nothing.
func (r *Repository) RefundPayment(ctx context.Context, req RefundRequest) (RefundOutcome, error) {
	var out RefundOutcome
	err := postgres.InTx(ctx, r.db, func(tx *sqlx.Tx) error {
		var err error
		out, err = r.Refund(ctx, tx, req)
		return err
	})
	if err != nil {
		return RefundOutcome{}, err
	}
	r.committed()
	return out, nil
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
	if out, found, err := recordedRefund(ctx, tx, req.RefundID); err != nil || found {
		return out, err
	}

	if req.Currency == "" && !noPayment {
		req.Currency = p.Currency
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
	cbType := rules.CallbackRefundSucceeded
	if rejection != nil {
		out = RefundOutcome{Status: RefundRejected, Reason: rejection.Reason}
		cbType = rules.CallbackRefundRejected
	}
	// The payment's row lock serializes two requests of one refund id, but
	// not when there is no payment: the second insert then waits for the
	// first and answers what it recorded.
	res, err := tx.ExecContext(ctx, `
		INSERT INTO refunds (refund_id, order_id, payment_id, amount, currency, status, reason, requested_reason, requested_by)
		VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $8, $9)
		ON CONFLICT (refund_id) DO NOTHING`,
		req.RefundID, req.OrderID, paymentID, req.Amount, req.Currency, out.Status, out.Reason, req.Reason, req.RequestedBy)
	if err != nil {
		return RefundOutcome{}, fmt.Errorf("record refund %s: %w", req.RefundID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return RefundOutcome{}, fmt.Errorf("record refund %s: %w", req.RefundID, err)
	} else if n == 0 {
		out, _, err := recordedRefund(ctx, tx, req.RefundID)
		return out, err
	}
	if rejection == nil {
		if _, err := tx.ExecContext(ctx, `
			UPDATE payments SET refunded = $2, status = $3, updated_at = now() WHERE payment_id = $1`,
			p.ID, p.Refunded, string(p.Status)); err != nil {
			return RefundOutcome{}, fmt.Errorf("update payment %s: %w", p.ID, err)
		}
	}

	if req.Currency == "" {
		// An operator's refund of an order without a payment here: the
		// order service did not ask for it, and a callback in no currency
		// would be refused (400) and retried forever, holding back the
		// order's later callbacks. The ledger keeps the rejection.
		return out, nil
	}
	cbPaymentID := p.ID
	if noPayment {
		cbPaymentID = req.PaymentID
	}
	cb := NewCallback(cbType, req.OrderID, cbPaymentID, req.Amount, req.Currency)
	cb.RefundID = req.RefundID
	cb.Reason = out.Reason
	if err := addCallback(ctx, tx, cb, req.OrderVersion); err != nil {
		return RefundOutcome{}, err
	}
	// In a consumer's transaction the relay is woken when the inbox has
	// committed it; RefundPayment, which commits its own, wakes it after.
	inbox.AfterCommit(ctx, r.committed)
	out.CallbackID = cb.CallbackID
	return out, nil
}

// PaymentRecord is an order's payment as reconciliation reads it.
type PaymentRecord struct {
	payment.Payment
	UpdatedAt time.Time
}

// RefundRecord is one entry of the refunds ledger: an executed or a
// rejected refund.
type RefundRecord struct {
	RefundID  string          `db:"refund_id"`
	OrderID   string          `db:"order_id"`
	Amount    decimal.Decimal `db:"amount"`
	Currency  string          `db:"currency"`
	Status    string          `db:"status"`
	Reason    string          `db:"reason"`
	CreatedAt time.Time       `db:"created_at"`
}

// OrderRecord is what the payment service holds of one order: its payment
// (nil if none), its refunds and its callbacks' outbox rows, oldest first.
type OrderRecord struct {
	Payment *PaymentRecord
	Refunds []RefundRecord
	Outbox  []outbox.Event
}

// Records reads the records of orderIDs through q with three statements,
// whatever their number; q is a snapshot the caller reads other tables in
// too. Every id has a record, empty for an order the service never saw;
// times are in UTC.
func (r *Repository) Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]OrderRecord, error) {
	var payments []struct {
		paymentRow
		UpdatedAt time.Time `db:"updated_at"`
	}
	if err := sqlx.SelectContext(ctx, q, &payments, `
		SELECT payment_id, order_id, amount, currency, status, refunded, created_at, updated_at
		FROM payments WHERE order_id = ANY($1)`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read payments of %d orders: %w", len(orderIDs), err)
	}
	var refunds []RefundRecord
	if err := sqlx.SelectContext(ctx, q, &refunds, `
		SELECT refund_id, order_id, amount, currency, status, coalesce(reason, '') AS reason, created_at
		FROM refunds WHERE order_id = ANY($1) ORDER BY created_at, refund_id`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read refunds of %d orders: %w", len(orderIDs), err)
	}
	rows, err := outbox.ForAggregates(ctx, q, orderIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]OrderRecord, len(orderIDs))
	for _, id := range orderIDs {
		events := rows[id]
		if events == nil {
			events = []outbox.Event{}
		}
		out[id] = OrderRecord{Refunds: []RefundRecord{}, Outbox: events}
	}
	for _, p := range payments {
		rec := out[p.OrderID]
		d := p.domain()
		d.CreatedAt = d.CreatedAt.UTC()
		rec.Payment = &PaymentRecord{Payment: d, UpdatedAt: p.UpdatedAt.UTC()}
		out[p.OrderID] = rec
	}
	for _, rf := range refunds {
		rec := out[rf.OrderID]
		rf.CreatedAt = rf.CreatedAt.UTC()
		rec.Refunds = append(rec.Refunds, rf)
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
