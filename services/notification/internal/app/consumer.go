// Package app turns order events into customer notifications: one for
// each OrderPaid, OrderRefunded, OrderRefundRejected and
// OrderPaymentReturned. It runs in the unit of work the kit hands it
// (versionguard.UnitOfWork: one transaction with the events' dedup rows),
// behind the version guard, so each event is told once and in order. It
// names no database package: its sender reaches the transaction through
// the unit of work.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// FailPoint is the fail point at the start of every apply, so tests and
// drills can make the consumer fail a number of times with a retryable error.
const FailPoint = "notification.apply"

// kinds maps the customer-facing events to their notification kind.
func kinds() map[event.Type]notification.Kind {
	return map[event.Type]notification.Kind{
		event.OrderPaid:            notification.KindOrderPaid,
		event.OrderRefunded:        notification.KindOrderRefunded,
		event.OrderRefundRejected:  notification.KindRefundRejected,
		event.OrderPaymentReturned: notification.KindPaymentReturned,
	}
}

// Consumer is the notification consumer's apply function and transition
// table.
type Consumer struct {
	senders SenderFactory
	fp      *failpoint.Registry
	logger  *slog.Logger
}

// NewConsumer returns a consumer that sends through senders.
func NewConsumer(senders SenderFactory, fp *failpoint.Registry, logger *slog.Logger) *Consumer {
	return &Consumer{senders: senders, fp: fp, logger: logger}
}

// Transitions is the notification state machine as the version guard
// needs it.
func (c *Consumer) Transitions() versionguard.Transitions {
	t := versionguard.Transitions{}
	for et, kind := range kinds() {
		t[et] = versionguard.StatesOf(notification.From(kind))
	}
	return t
}

// Apply sends the notifications of a batch of events of distinct orders
// in uow, in one call of the sender, and returns each order's new
// notification state, which lives in the version guard (the Pending's
// state).
func (c *Consumer) Apply(ctx context.Context, uow *versionguard.UnitOfWork, batch []versionguard.Pending) ([]string, error) {
	ns := make([]notification.Notification, len(batch))
	states := make([]string, len(batch))
	for i, p := range batch {
		if err := c.fp.Inject(FailPoint); err != nil {
			return nil, err
		}
		facts, err := factsOf(p.Env)
		if err != nil {
			return nil, err
		}
		ch, err := notification.Order{ID: p.Env.AggregateID, State: notification.State(p.State)}.Notify(facts)
		if err != nil {
			return nil, err
		}
		ns[i], states[i] = ch.Notification, string(ch.State)
	}
	if err := c.senders(uow).Send(ctx, ns); err != nil {
		return nil, err
	}
	return states, nil
}

// LateFacts tells the customer of a refund, a declined refund or a returned
// payment whose event arrives after a newer one of the order was applied
// (docs/decisions.md, Late facts are told): the version guard would ignore
// it as stale, and the customer would never hear of it.
func (c *Consumer) LateFacts() versionguard.LateFacts {
	var types []event.Type
	for et, kind := range kinds() {
		if slices.Contains(notification.PerFact(), kind) {
			types = append(types, et)
		}
	}
	slices.Sort(types)
	return versionguard.LateFacts{Types: types, Apply: func(ctx context.Context, uow *versionguard.UnitOfWork, env event.Envelope) error {
		facts, err := factsOf(env)
		if err != nil {
			return err
		}
		n, err := notification.Order{ID: env.AggregateID}.Late(facts)
		if err != nil {
			return err
		}
		return c.senders(uow).Send(ctx, []notification.Notification{n})
	}}
}

// factsOf reads what the customer is told from the event's payload.
func factsOf(env event.Envelope) (notification.Facts, error) {
	f := notification.Facts{Kind: kinds()[env.EventType], OrderID: env.AggregateID, EventID: env.EventID}
	switch env.EventType {
	case event.OrderPaid:
		var d event.OrderPaidData
		if err := env.DecodeData(&d); err != nil {
			return f, err
		}
		f.CustomerID, f.Amount, f.Currency = d.CustomerID, d.PaidAmount.String(), d.Currency
	case event.OrderRefunded:
		d, err := env.RefundedData()
		if err != nil {
			return f, err
		}
		f.CustomerID, f.Amount, f.Currency = d.CustomerID, d.RefundedAmount.String(), d.Currency
		f.OutOfStock = d.Reason == rules.ReasonOutOfStock
		f.GoodsOnly = d.RefundedAmount.IsZero()
	case event.OrderPaymentReturned:
		var d event.OrderPaymentReturnedData
		if err := env.DecodeData(&d); err != nil {
			return f, err
		}
		f.CustomerID, f.Amount, f.Currency = d.CustomerID, d.Amount.String(), d.Currency
	case event.OrderRefundRejected:
		var d event.OrderRefundRejectedData
		if err := env.DecodeData(&d); err != nil {
			return f, err
		}
		f.CustomerID, f.Amount, f.Currency, f.Reason = d.CustomerID, d.Amount.String(), d.Currency, d.Reason
	default:
		return f, fmt.Errorf("%w: no notification for %s", notification.ErrUnknownKind, env.EventType)
	}
	return f, nil
}
