// Package app applies order events to shipments: OrderPaid creates the
// order's shipment, OrderRefunded takes the returned goods off it. It runs
// in the unit of work the kit hands it (versionguard.UnitOfWork: one
// transaction with the events' dedup rows), behind the version guard, so
// each event changes a shipment once and in order. It names no database
// package: its adapters reach the transaction through the unit of work.
package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/domain/shipping"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "shipping.apply"

// Store is the storage the consumer needs, all in the unit of work the kit
// hands Apply and each one statement whatever the number of orders.
type Store interface {
	Shipments(ctx context.Context, uow *versionguard.UnitOfWork, orderIDs []string) (map[string]shipping.Shipment, error)
	Save(ctx context.Context, uow *versionguard.UnitOfWork, changes []shipping.Change) error
}

// Consumer is the shipping consumer's apply function and transition table.
type Consumer struct {
	store Store
	fp    *failpoint.Registry
}

// NewConsumer returns a consumer over store.
func NewConsumer(store Store, fp *failpoint.Registry) *Consumer {
	return &Consumer{store: store, fp: fp}
}

// Transitions is the shipping state machine as the version guard needs it.
// The guard hands the consumer no other event type.
func (c *Consumer) Transitions() versionguard.Transitions {
	return versionguard.Transitions{
		event.OrderPaid:     versionguard.StatesOf(shipping.PaidFrom()),
		event.OrderRefunded: versionguard.StatesOf(shipping.RefundedFrom()),
	}
}

// Apply changes the shipments of a batch of events of distinct orders
// in uow: it reads them with one statement, decides each event in the
// domain and writes every change with one statement per table, and returns
// each order's new shipping state.
func (c *Consumer) Apply(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
	ids := make([]string, len(batch))
	for i, p := range batch {
		if err := c.fp.Inject(FailPoint); err != nil {
			return nil, err
		}
		ids[i] = p.Env.AggregateID
	}
	shipments, err := c.store.Shipments(ctx, uow, ids)
	if err != nil {
		return nil, err
	}
	changes := make([]shipping.Change, len(batch))
	states := make([]string, len(batch))
	for i, p := range batch {
		next, err := decide(p.Env, shipments[p.Env.AggregateID])
		var ruleErr *rules.RuleError
		if errors.As(err, &ruleErr) {
			// Lines that break a rule (which Parse already refuses) fail
			// the same way on every delivery.
			return nil, consumer.PermanentError("INVALID_ITEMS", err)
		}
		if err != nil {
			return nil, err
		}
		changes[i] = shipping.Change{EventID: p.Env.EventID, EventType: string(p.Env.EventType), Shipment: next}
		states[i] = string(next.Status)
	}
	if err := c.store.Save(ctx, uow, changes); err != nil {
		return nil, err
	}
	return states, nil
}

// decide applies env to the order's shipment in the domain. OrderRefunded
// is read with RefundedData, so a v1 refund (the order's only one, which
// returned every item) and a v2 refund (with the running total of returned
// goods) read alike.
func decide(env event.Envelope, s shipping.Shipment) (shipping.Shipment, error) {
	switch env.EventType {
	case event.OrderPaid:
		var data event.OrderPaidData
		if err := env.DecodeData(&data); err != nil {
			return shipping.Shipment{}, err
		}
		return s.Pay(lines(data.Items))
	case event.OrderRefunded:
		data, err := env.RefundedData()
		if err != nil {
			return shipping.Shipment{}, err
		}
		return s.Refund(lines(data.TotalReturnedItems))
	default:
		return shipping.Shipment{}, fmt.Errorf("%w: no shipping rule for %s", shipping.ErrIllegalTransition, env.EventType)
	}
}

func lines(items []event.Item) []shipping.Line {
	out := make([]shipping.Line, len(items))
	for i, it := range items {
		out[i] = shipping.Line{SKU: it.SKU, Quantity: it.Quantity}
	}
	return out
}
