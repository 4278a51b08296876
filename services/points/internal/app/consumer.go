// Package app applies order events to the points ledger: OrderPaid
// earns points, each OrderRefunded writes one reversal that brings the
// order to what it is still worth, never below zero. It runs in the unit
// of work the kit hands it (versionguard.UnitOfWork: one transaction with
// the events' dedup rows), behind the version guard, so each event writes
// at most one entry, in order. It names no database package: its adapters
// reach the transaction through the unit of work.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "points.apply"

// Store is the storage the consumer needs, all in the unit of work the kit
// hands Apply and each one statement whatever the number of orders.
type Store interface {
	Orders(ctx context.Context, uow *versionguard.UnitOfWork, orderIDs []string) (map[string]points.Order, error)
	Add(ctx context.Context, uow *versionguard.UnitOfWork, entries []points.LedgerEntry) error
}

// Consumer is the points consumer's apply function and transition table.
type Consumer struct {
	store  Store
	fp     *failpoint.Registry
	logger *slog.Logger
}

// NewConsumer returns a consumer over store.
func NewConsumer(store Store, fp *failpoint.Registry, logger *slog.Logger) *Consumer {
	return &Consumer{store: store, fp: fp, logger: logger}
}

// Transitions is the points state machine as the version guard needs it.
func (c *Consumer) Transitions() versionguard.Transitions {
	return versionguard.Transitions{
		event.OrderPaid:     versionguard.StatesOf(points.PaidFrom),
		event.OrderRefunded: versionguard.StatesOf(points.RefundedFrom),
	}
}

// Apply writes the ledger entries of a batch of events of distinct orders
// in uow, in one statement, and returns each order's new points state.
// The points state lives in the version guard (the Pending's state); the
// ledger is the only table.
func (c *Consumer) Apply(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
	var refunded []string
	for _, p := range batch {
		if err := c.fp.Inject(FailPoint); err != nil {
			return nil, err
		}
		if p.Env.EventType == event.OrderRefunded {
			refunded = append(refunded, p.Env.AggregateID)
		}
	}
	var ledgers map[string]points.Order
	if len(refunded) > 0 {
		var err error
		if ledgers, err = c.store.Orders(ctx, uow, refunded); err != nil {
			return nil, err
		}
	}
	entries := make([]points.LedgerEntry, 0, len(batch))
	states := make([]string, len(batch))
	for i, p := range batch {
		order := ledgers[p.Env.AggregateID]
		order.ID, order.State = p.Env.AggregateID, points.State(p.State)
		ch, customer, err := decide(p.Env, order)
		var ruleErr *rules.RuleError
		if errors.As(err, &ruleErr) {
			// An amount that breaks the contract's rule (which Parse
			// already refuses) fails the same way on every delivery.
			return nil, consumer.PermanentError("INVALID_AMOUNT", err)
		}
		if err != nil {
			return nil, err
		}
		entries = append(entries, points.LedgerEntry{Entry: ch.Entry, OrderID: order.ID, CustomerID: customer, EventID: p.Env.EventID})
		states[i] = string(ch.State)
	}
	if err := c.store.Add(ctx, uow, entries); err != nil {
		return nil, err
	}
	return states, nil
}

// decide applies env to order in the domain and names the customer.
func decide(env event.Envelope, order points.Order) (points.Change, string, error) {
	switch env.EventType {
	case event.OrderPaid:
		var data event.OrderPaidData
		if err := env.DecodeData(&data); err != nil {
			return points.Change{}, "", err
		}
		ch, err := order.Pay(data.PaidAmount.Decimal)
		return ch, data.CustomerID, err
	case event.OrderRefunded:
		data, err := env.RefundedData()
		if err != nil {
			return points.Change{}, "", err
		}
		ch, err := order.Refund(data.TotalRefundedAmount.Decimal)
		return ch, data.CustomerID, err
	default:
		return points.Change{}, "", fmt.Errorf("%w: no points rule for %s", points.ErrIllegalTransition, env.EventType)
	}
}
