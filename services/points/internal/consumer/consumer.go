// Package consumer applies order events to the points ledger: OrderPaid
// earns points, OrderRefunded reverses them (or is rejected when that would
// take the order below zero). It runs inside the inbox transaction, behind
// the version guard, so each event writes at most one entry, in order.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "points.apply"

// Store is the storage the consumer needs, all inside the inbox transaction.
type Store interface {
	OrderPoints(ctx context.Context, tx *sqlx.Tx, orderID string) (int, error)
	Add(ctx context.Context, tx *sqlx.Tx, e points.LedgerEntry) error
}

// FailPoints fires named faults; a nil *failpoint.Registry is inert.
type FailPoints interface {
	Inject(name string) error
}

// Consumer is the points consumer's apply function and transition table.
type Consumer struct {
	store  Store
	fp     FailPoints
	logger *slog.Logger
}

// New returns a consumer over store.
func New(store Store, fp FailPoints, logger *slog.Logger) *Consumer {
	return &Consumer{store: store, fp: fp, logger: logger}
}

// Transitions is the points state machine as the version guard needs it.
func (c *Consumer) Transitions() versionguard.Transitions {
	return versionguard.Transitions{
		event.OrderPaid:     states(points.PaidFrom),
		event.OrderRefunded: states(points.RefundedFrom),
	}
}

func states(ss []points.State) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// Apply writes env's ledger entry inside tx and returns the order's new
// points state. The points state lives in the version guard (the state
// argument); the ledger is the only table. A reversal that would go below
// zero writes nothing and returns no error: a business outcome, never
// retried.
func (c *Consumer) Apply(ctx context.Context, tx *sqlx.Tx, env event.Envelope, state string) (string, error) {
	if err := c.fp.Inject(FailPoint); err != nil {
		return "", err
	}
	order := points.Order{ID: env.AggregateID, State: points.State(state)}
	var (
		ch       points.Change
		customer string
		err      error
	)
	switch env.EventType {
	case event.OrderPaid:
		var data event.OrderPaidData
		if err := env.DecodeData(&data); err != nil {
			return "", err
		}
		customer = data.CustomerID
		ch, err = order.Pay(data.PaidAmount.Decimal)
	case event.OrderRefunded:
		var data event.OrderRefundedData
		if err := env.DecodeData(&data); err != nil {
			return "", err
		}
		customer = data.CustomerID
		if order.Points, err = c.store.OrderPoints(ctx, tx, order.ID); err != nil {
			return "", err
		}
		ch, err = order.Refund(data.RefundedAmount.Decimal)
	default:
		return "", fmt.Errorf("%w: no points rule for %s", points.ErrIllegalTransition, env.EventType)
	}
	if errors.Is(err, points.ErrInvalidAmount) {
		// An amount the ledger cannot hold fails the same way on every delivery.
		return "", messaging.PermanentError("INVALID_AMOUNT", err)
	}
	if err != nil {
		return "", err
	}
	if ch.Entry != nil {
		if err := c.store.Add(ctx, tx, points.LedgerEntry{
			Entry: *ch.Entry, OrderID: order.ID, CustomerID: customer, EventID: env.EventID,
		}); err != nil {
			return "", err
		}
	}
	if ch.Rejection != "" {
		c.logger.InfoContext(ctx, "points reversal rejected",
			"orderId", order.ID, "reason", ch.Rejection, "orderPoints", order.Points)
	}
	return string(ch.State), nil
}
