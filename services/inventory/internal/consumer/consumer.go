// Package consumer applies order events to inventory: OrderPaid deducts the
// order's stock (or rejects the order when stock is short), OrderRefunded
// restocks what was deducted. It runs inside the inbox transaction, behind
// the version guard, so each event moves stock once and in order.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "inventory.apply"

// Store is the storage the consumer needs, all inside the inbox transaction.
type Store interface {
	LoadOrder(ctx context.Context, tx *sqlx.Tx, orderID string) (inventory.Order, error)
	LockStock(ctx context.Context, tx *sqlx.Tx, skus []string) (map[string]int, error)
	Save(ctx context.Context, tx *sqlx.Tx, eventID string, ch inventory.Change) error
}

// FailPoints fires named faults; a nil *failpoint.Registry is inert.
type FailPoints interface {
	Inject(name string) error
}

// Consumer is the inventory consumer's apply function and transition table.
type Consumer struct {
	store  Store
	fp     FailPoints
	logger *slog.Logger
}

// New returns a consumer over store.
func New(store Store, fp FailPoints, logger *slog.Logger) *Consumer {
	return &Consumer{store: store, fp: fp, logger: logger}
}

// Transitions is inventory's state machine as the version guard needs it.
func (c *Consumer) Transitions() versionguard.Transitions {
	return versionguard.Transitions{
		event.OrderPaid:     states(inventory.PaidFrom),
		event.OrderRefunded: states(inventory.RefundedFrom),
	}
}

func states(ss []inventory.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// Apply performs env's effect on stock inside tx and returns the order's
// new inventory state. A payment the stock cannot cover is recorded as
// REJECTED and returns no error: it is a business outcome, never retried.
func (c *Consumer) Apply(ctx context.Context, tx *sqlx.Tx, env event.Envelope, _ string) (string, error) {
	if err := c.fp.Inject(FailPoint); err != nil {
		return "", err
	}
	order, err := c.store.LoadOrder(ctx, tx, env.AggregateID)
	if err != nil {
		return "", err
	}
	var ch inventory.Change
	switch env.EventType {
	case event.OrderPaid:
		ch, err = c.pay(ctx, tx, env, order)
	case event.OrderRefunded:
		ch, err = c.refund(ctx, tx, order)
	default:
		return "", fmt.Errorf("%w: no inventory rule for %s", inventory.ErrIllegalTransition, env.EventType)
	}
	if err != nil {
		return "", err
	}
	if err := c.store.Save(ctx, tx, env.EventID, ch); err != nil {
		return "", err
	}
	if len(ch.Shortages) > 0 {
		c.logger.InfoContext(ctx, "payment rejected by inventory",
			"orderId", ch.Order.ID, "reason", ch.Order.Reason, "shortages", ch.Shortages)
	}
	return string(ch.Order.Status), nil
}

// Prepare locks the stock rows of every SKU a batch of events touches, in
// SKU order, before any event of the batch is applied. Batches of different
// consumer instances over the same hot SKUs then queue on the first lock
// instead of deadlocking on each other's rows.
func (c *Consumer) Prepare(ctx context.Context, tx *sqlx.Tx, envs []event.Envelope) error {
	var skus []string
	for _, env := range envs {
		var data struct {
			Items []event.Item `json:"items"`
		}
		if env.EventType != event.OrderPaid && env.EventType != event.OrderRefunded {
			continue
		}
		if err := env.DecodeData(&data); err != nil {
			return err
		}
		for _, it := range data.Items {
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

func (c *Consumer) pay(ctx context.Context, tx *sqlx.Tx, env event.Envelope, order inventory.Order) (inventory.Change, error) {
	var data event.OrderPaidData
	if err := env.DecodeData(&data); err != nil {
		return inventory.Change{}, err
	}
	lines := make([]inventory.Line, len(data.Items))
	for i, it := range data.Items {
		lines[i] = inventory.Line{SKU: it.SKU, Quantity: it.Quantity}
	}
	available, err := c.store.LockStock(ctx, tx, inventory.SKUs(lines))
	if err != nil {
		return inventory.Change{}, err
	}
	ch, err := order.Pay(lines, available)
	if errors.Is(err, inventory.ErrInvalidQuantity) || errors.Is(err, inventory.ErrInvalidSKU) {
		// Lines the schema let through but the stock range cannot hold fail
		// the same way on every delivery.
		return inventory.Change{}, messaging.PermanentError("INVALID_ITEMS", err)
	}
	return ch, err
}

func (c *Consumer) refund(ctx context.Context, tx *sqlx.Tx, order inventory.Order) (inventory.Change, error) {
	ch, err := order.Refund()
	if err != nil || len(ch.Movements) == 0 {
		return ch, err
	}
	// Restocking takes the same row locks, in the same order, as deducting.
	if _, err := c.store.LockStock(ctx, tx, inventory.SKUs(order.Items)); err != nil {
		return inventory.Change{}, err
	}
	return ch, nil
}
