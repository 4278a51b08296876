// Package app applies order events to inventory: OrderPaid deducts the
// order's stock (or rejects the order when stock is short), OrderRefunded
// restocks what was deducted. It runs inside the inbox transaction, behind
// the version guard, so each event moves stock once and in order.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "inventory.apply"

// Store is the storage the consumer needs, all inside the inbox transaction
// and each one statement whatever the number of orders.
type Store interface {
	LoadOrders(ctx context.Context, tx *sqlx.Tx, orderIDs []string) (map[string]inventory.Order, error)
	LockStock(ctx context.Context, tx *sqlx.Tx, skus []string) (map[string]int, error)
	SaveAll(ctx context.Context, tx *sqlx.Tx, changes []inventory.EventChange) error
}

// Consumer is the inventory consumer's apply function and transition table.
type Consumer struct {
	store  Store
	fp     *failpoint.Registry
	logger *slog.Logger
}

// NewConsumer returns a consumer over store.
func NewConsumer(store Store, fp *failpoint.Registry, logger *slog.Logger) *Consumer {
	return &Consumer{store: store, fp: fp, logger: logger}
}

// Transitions is inventory's state machine as the version guard needs it.
func (c *Consumer) Transitions() versionguard.Transitions {
	return versionguard.Transitions{
		event.OrderPaid:     versionguard.StatesOf(inventory.PaidFrom),
		event.OrderRefunded: versionguard.StatesOf(inventory.RefundedFrom),
	}
}

// Apply performs the effects of a batch of events of distinct orders on
// stock inside tx and returns each order's new inventory state. It reads the
// orders and locks their SKUs' stock rows (in SKU order) once, decides each
// event in turn against the stock the earlier ones left, and writes all the
// changes at once, one statement per table: per-SKU deltas are summed, so a
// hot SKU is updated once per batch. A payment the stock cannot cover is
// recorded as REJECTED and returns no error: it is a business outcome, never
// retried.
func (c *Consumer) Apply(ctx context.Context, tx *sqlx.Tx, batch []versionguard.Pending) ([]string, error) {
	ids := make([]string, len(batch))
	lines := make([][]inventory.Line, len(batch))
	var skus []string
	for i, p := range batch {
		if err := c.fp.Inject(FailPoint); err != nil {
			return nil, err
		}
		ids[i] = p.Env.AggregateID
		var items []event.Item
		switch p.Env.EventType {
		case event.OrderPaid:
			var data event.OrderPaidData
			if err := p.Env.DecodeData(&data); err != nil {
				return nil, err
			}
			items = data.Items
		case event.OrderRefunded:
			data, err := p.Env.RefundedData()
			if err != nil {
				return nil, err
			}
			items = data.TotalReturnedItems
		}
		lines[i] = make([]inventory.Line, len(items))
		for j, it := range items {
			lines[i][j] = inventory.Line{SKU: it.SKU, Quantity: it.Quantity}
			skus = append(skus, it.SKU)
		}
	}
	orders, err := c.store.LoadOrders(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if o := orders[id]; o.Status == inventory.StatusDeducted {
			skus = append(skus, inventory.SKUs(o.Items)...) // a refund restocks them
		}
	}
	slices.Sort(skus)
	available, err := c.store.LockStock(ctx, tx, slices.Compact(skus))
	if err != nil {
		return nil, err
	}

	changes := make([]inventory.EventChange, len(batch))
	states := make([]string, len(batch))
	for i, p := range batch {
		order := orders[p.Env.AggregateID]
		var ch inventory.Change
		switch p.Env.EventType {
		case event.OrderPaid:
			ch, err = order.Pay(lines[i], available)
			var ruleErr *event.RuleError
			if errors.As(err, &ruleErr) || errors.Is(err, inventory.ErrInvalidQuantity) {
				// Lines that break a rule (which Parse already refuses) or
				// that the stock range cannot hold fail the same way on
				// every delivery.
				return nil, consumer.PermanentError("INVALID_ITEMS", err)
			}
		case event.OrderRefunded:
			ch, err = order.Refund(lines[i])
		default:
			err = fmt.Errorf("%w: no inventory rule for %s", inventory.ErrIllegalTransition, p.Env.EventType)
		}
		if err != nil {
			return nil, err
		}
		for _, m := range ch.Movements {
			available[m.SKU] += m.Delta // the next order of the batch sees this one's deduction
		}
		if len(ch.Shortages) > 0 {
			c.logger.InfoContext(ctx, "payment rejected by inventory",
				"orderId", ch.Order.ID, "reason", ch.Order.Reason, "shortages", ch.Shortages)
		}
		changes[i] = inventory.EventChange{EventID: p.Env.EventID, Change: ch}
		states[i] = string(ch.Order.Status)
	}
	if err := c.store.SaveAll(ctx, tx, changes); err != nil {
		return nil, err
	}
	return states, nil
}

// Prepare locks the stock rows of every SKU a batch of events touches, in
// SKU order, before any event of the batch is applied. Batches of different
// consumer instances over the same hot SKUs then queue on the first lock
// instead of deadlocking on each other's rows.
func (c *Consumer) Prepare(ctx context.Context, tx *sqlx.Tx, envs []event.Envelope) error {
	var skus []string
	for _, env := range envs {
		var items []event.Item
		switch env.EventType {
		case event.OrderPaid:
			var data event.OrderPaidData
			if err := env.DecodeData(&data); err != nil {
				return err
			}
			items = data.Items
		case event.OrderRefunded:
			data, err := env.RefundedData()
			if err != nil {
				return err
			}
			items = data.TotalReturnedItems
		}
		for _, it := range items {
			skus = append(skus, it.SKU)
		}
	}
	if len(skus) == 0 {
		return nil
	}
	slices.Sort(skus)
	_, err := c.store.LockStock(ctx, tx, slices.Compact(skus))
	return err
}
