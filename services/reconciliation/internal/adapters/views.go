package adapters

import (
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
	"github.com/reliable-orders/fulfillment/services/order/orderapi"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// The services' read-only reconciliation views (POST
// /admin/reconciliation/orders on each service, README.md (API)) arrive
// as the types of each service's contract package (orderapi, paymentapi,
// inventoryapi, pointsapi, notificationapi); these functions turn them
// into the facts the domain compares.

func linesOf(ls []orderapi.LineView) []rec.Line {
	out := make([]rec.Line, len(ls))
	for i, l := range ls {
		out[i] = rec.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
}

func stockLinesOf(ls []inventoryapi.Line) []rec.Line {
	out := make([]rec.Line, len(ls))
	for i, l := range ls {
		out[i] = rec.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
}

func outboxOf(rows []outbox.Event) []rec.OutboxRow {
	out := make([]rec.OutboxRow, len(rows))
	for i, r := range rows {
		out[i] = rec.OutboxRow{EventID: r.EventID, EventType: r.EventType, AggregateVersion: r.AggregateVersion,
			Status: r.Status, Attempts: r.Attempts, CreatedAt: r.CreatedAt, NextAttemptAt: r.NextAttemptAt}
	}
	return out
}

// orderOf is the order service's view of an order; an order it never saw
// carries its id only.
func orderOf(v orderapi.ReconciliationView) rec.Order {
	o := rec.Order{ID: v.OrderID, Found: v.Found}
	r := v.ReconciledOrder
	if r == nil {
		return o
	}
	o.Status, o.Version, o.Amount, o.Currency, o.CustomerID = r.Status, r.Version, r.Amount.Decimal, r.Currency, r.CustomerID
	o.PaymentID, o.RefundedAmount, o.ReturnedItems = r.PaymentID, r.RefundedAmount.Decimal, linesOf(r.ReturnedItems)
	o.UpdatedAt, o.Events = r.UpdatedAt, outboxOf(r.Events)
	for _, it := range r.Items {
		o.Items = append(o.Items, rec.OrderLine{Line: rec.Line{SKU: it.SKU, Quantity: it.Quantity}, UnitPrice: it.UnitPrice.Decimal})
	}
	for _, f := range r.Refunds {
		o.Refunds = append(o.Refunds, rec.Refund{ID: f.RefundID, Kind: f.Kind, PaymentID: f.PaymentID, Amount: f.Amount.Decimal,
			Currency: f.Currency, Items: linesOf(f.Items), Status: f.Status, Reason: f.Reason})
	}
	return o
}

// factsOf is the part every consumer's view shares: its version guard for
// the order and the order's outstanding dead letters.
func factsOf(c admin.ConsumerFacts) (rec.ConsumerState, []rec.DeadLetter) {
	dead := make([]rec.DeadLetter, len(c.DeadLetters))
	for i, d := range c.DeadLetters {
		dead[i] = rec.DeadLetter{ID: d.ID, EventID: d.EventID, EventType: d.EventType, ErrorClass: d.ErrorClass,
			FailureReason: d.FailureReason, DeadLetteredAt: d.DeadLetteredAt, ReplayedBefore: d.ReplayedBefore}
	}
	return rec.ConsumerState{Version: c.Consumer.Version, State: c.Consumer.State}, dead
}

func paymentOf(v paymentapi.ReconciliationView) rec.Payment {
	var p rec.Payment
	if v.Payment != nil {
		p = rec.Payment{Found: true, PaymentID: v.Payment.PaymentID, Amount: v.Payment.Amount.Decimal, Currency: v.Payment.Currency,
			Status: v.Payment.Status, Refunded: v.Payment.Refunded.Decimal, UpdatedAt: v.Payment.UpdatedAt}
	}
	for _, r := range v.Refunds {
		p.Refunds = append(p.Refunds, rec.PaymentRefund{ID: r.RefundID, Amount: r.Amount.Decimal, Status: r.Status,
			Reason: r.Reason, CreatedAt: r.CreatedAt})
	}
	p.Outbox = outboxOf(v.Outbox)
	p.Consumer, p.Dead = factsOf(v.ConsumerFacts)
	return p
}

func inventoryOf(v inventoryapi.ReconciliationView) rec.Inventory {
	inv := rec.Inventory{Status: v.Status, Reason: v.Reason, Items: stockLinesOf(v.Items), Restocked: stockLinesOf(v.Restocked)}
	if v.UpdatedAt != nil {
		inv.UpdatedAt = *v.UpdatedAt
	}
	inv.Consumer, inv.Dead = factsOf(v.ConsumerFacts)
	return inv
}

// pointsOf is the points service's view of an order; an entry's amount
// that is not a decimal makes the answer unreadable.
func pointsOf(v pointsapi.ReconciliationView) (rec.Points, error) {
	var p rec.Points
	for _, e := range v.Entries {
		amount, err := event.ParseMoney(e.Amount)
		if err != nil {
			return rec.Points{}, fmt.Errorf("%w: points entry %s of order %s: %w", app.ErrUnavailable, e.EventID, v.OrderID, err)
		}
		p.Entries = append(p.Entries, rec.PointsEntry{EventID: e.EventID, Type: e.Type, Points: e.Points, Amount: amount.Decimal, CreatedAt: e.CreatedAt})
	}
	p.Consumer, p.Dead = factsOf(v.ConsumerFacts)
	return p, nil
}

func notificationsOf(v notificationapi.ReconciliationView) rec.Notifications {
	var n rec.Notifications
	for _, s := range v.Notifications {
		n.Sent = append(n.Sent, rec.Notice{EventID: s.EventID, Kind: s.Kind, CreatedAt: s.CreatedAt})
	}
	n.Consumer, n.Dead = factsOf(v.ConsumerFacts)
	return n
}
