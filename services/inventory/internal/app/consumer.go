// Package app applies order events to inventory: OrderPaid deducts the
// order's stock (or rejects the order when stock is short), OrderRefunded
// restocks what was deducted. It runs in the unit of work the kit hands it
// (versionguard.UnitOfWork: one transaction with the events' dedup rows),
// behind the version guard, so each event moves stock once and in order.
// It names no database package: its adapters reach the transaction
// through the unit of work.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "inventory.apply"

// Store is the storage the consumer needs, all in the unit of work the kit
// hands Apply and each one statement whatever the number of orders.
type Store interface {
	LoadOrders(ctx context.Context, uow *versionguard.UnitOfWork, orderIDs []string) (map[string]inventory.Order, error)
	ReadStock(ctx context.Context, uow *versionguard.UnitOfWork, skus []string) (map[string]int, error)
	LockStock(ctx context.Context, uow *versionguard.UnitOfWork, skus []string) (map[string]int, error)
	SaveAll(ctx context.Context, uow *versionguard.UnitOfWork, changes []inventory.EventChange) error
	// AddCallbacks writes callbacks to the order service into the
	// unit of work's outbox, so they are sent once it commits.
	AddCallbacks(ctx context.Context, uow *versionguard.UnitOfWork, callbacks []event.Callback) error
	// MoveStock moves the stock by the changes' deltas if it still covers
	// them, and returns false otherwise.
	MoveStock(ctx context.Context, uow *versionguard.UnitOfWork, changes []inventory.EventChange) (bool, error)
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
// stock in uow and returns each order's new inventory state. It reads
// the orders and their SKUs' stock once, decides each event in turn against
// the stock the earlier ones left, and writes all the changes at once, one
// statement per table: per-SKU deltas are summed, so a hot SKU is updated
// once per batch. A payment the stock cannot cover is recorded as REJECTED
// and returns no error: it is a business outcome, never retried.
//
// The stock rows are what every batch of every instance shares, so they
// are locked as late as possible: the decision uses the stock as read, and
// the stock moves in the transaction's last statement before the commit
// (uow.BeforeCommit), only if every SKU still covers its deductions.
// Batches then queue on the hot rows for that statement and the commit
// only, which is what lets instances added to a drain add throughput. If
// another batch took the stock meanwhile (or an earlier apply in the same
// transaction, whose move is queued too), the kit runs the unit of work
// again (uow.Locking), and Apply then decides with the rows locked and
// moves them at once.
func (c *Consumer) Apply(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
	ids := make([]string, len(batch))
	lines := make([][]inventory.Line, len(batch))
	paid := make([]event.OrderPaidData, len(batch))
	var skus []string
	for i, p := range batch {
		if err := c.fp.Inject(FailPoint); err != nil {
			return nil, err
		}
		ids[i] = p.Env.AggregateID
		items, err := eventItems(p.Env, &paid[i])
		if err != nil {
			return nil, err
		}
		lines[i] = make([]inventory.Line, len(items))
		for j, it := range items {
			lines[i][j] = inventory.Line{SKU: it.SKU, Quantity: it.Quantity}
			skus = append(skus, it.SKU)
		}
	}
	orders, err := c.store.LoadOrders(ctx, uow, ids)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		if o := orders[id]; o.Status == inventory.StatusDeducted {
			skus = append(skus, inventory.SKUs(o.Items)...) // a refund restocks them
		}
	}
	slices.Sort(skus)
	locking := uow.Locking()
	read := c.store.ReadStock
	if locking {
		read = c.store.LockStock
	}
	available, err := read(ctx, uow, slices.Compact(skus))
	if err != nil {
		return nil, err
	}
	changes, err := decide(batch, lines, orders, available)
	if err != nil {
		return nil, err
	}
	if err := c.store.SaveAll(ctx, uow, changes); err != nil {
		return nil, err
	}
	if err := c.store.AddCallbacks(ctx, uow, shortages(changes, paid)); err != nil {
		return nil, err
	}
	states := make([]string, len(changes))
	for i, ch := range changes {
		states[i] = string(ch.Change.Order.Status)
	}
	move := func(ctx context.Context) error {
		moved, err := c.store.MoveStock(ctx, uow, changes)
		if err != nil {
			return err
		}
		if !moved {
			return fmt.Errorf("inventory: stock changed since it was read: %w", versionguard.ErrContended)
		}
		for _, ch := range changes {
			if len(ch.Change.Shortages) > 0 {
				c.logger.InfoContext(ctx, "payment rejected by inventory",
					"orderId", ch.Change.Order.ID, "reason", ch.Change.Order.Reason, "shortages", ch.Change.Shortages)
			}
		}
		return nil
	}
	if locking {
		// The rows are locked already, and a later apply in the same
		// transaction (a parked event drained after this one) must see
		// this one's move when it reads them.
		return states, move(ctx)
	}
	uow.BeforeCommit(move)
	return states, nil
}

// shortages are the callbacks that tell the order service of the paid
// orders of changes the stock could not cover; paid holds each change's
// OrderPaid. The order then gives the customer's money back, so nobody
// pays for goods that never ship (docs/decisions.md, A shortage is
// compensated).
func shortages(changes []inventory.EventChange, paid []event.OrderPaidData) []event.Callback {
	var out []event.Callback
	for i, ch := range changes {
		if len(ch.Change.Shortages) == 0 {
			continue
		}
		p := paid[i]
		cb := event.NewCallback(rules.CallbackStockRejected, ch.Change.Order.ID, p.PaymentID, p.PaidAmount.Decimal, p.Currency)
		cb.Reason = ch.Change.Order.Reason
		out = append(out, cb)
	}
	return out
}

// eventItems are the lines an event moves: what was paid, or what was
// returned. An OrderPaid's payload is also decoded into paid.
func eventItems(env event.Envelope, paid *event.OrderPaidData) ([]event.Item, error) {
	switch env.EventType {
	case event.OrderPaid:
		if err := env.DecodeData(paid); err != nil {
			return nil, err
		}
		return paid.Items, nil
	case event.OrderRefunded:
		data, err := env.RefundedData()
		if err != nil {
			return nil, err
		}
		return data.TotalReturnedItems, nil
	}
	return nil, nil
}

// decide applies each event of batch in turn to its order and to
// available, which it changes: the next order of the batch sees the
// earlier ones' deductions.
func decide(batch []versionguard.Pending, lines [][]inventory.Line, orders map[string]inventory.Order, available map[string]int) ([]inventory.EventChange, error) {
	changes := make([]inventory.EventChange, len(batch))
	for i, p := range batch {
		order := orders[p.Env.AggregateID]
		var (
			ch  inventory.Change
			err error
		)
		switch p.Env.EventType {
		case event.OrderPaid:
			ch, err = order.Pay(lines[i], available)
			var ruleErr *rules.RuleError
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
			available[m.SKU] += m.Delta
		}
		changes[i] = inventory.EventChange{EventID: p.Env.EventID, Change: ch}
	}
	return changes, nil
}
