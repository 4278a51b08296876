package reconciliation

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Kind says what is wrong.
type Kind string

// The kinds of finding.
const (
	// PaymentForUnpayableOrder: money was taken for an order that cannot
	// take it (cancelled before the payment arrived) and not given back.
	PaymentForUnpayableOrder Kind = "PAYMENT_FOR_UNPAYABLE_ORDER"
	// MissingEffect: a service has not done what the order's state
	// requires (a deduction, a ledger entry, a notification, a callback).
	MissingEffect Kind = "MISSING_EFFECT"
	// ExtraEffect: a service did more than the order's state allows.
	ExtraEffect Kind = "EXTRA_EFFECT"
	// AmountMismatch: two services disagree on an amount.
	AmountMismatch Kind = "AMOUNT_MISMATCH"
	// StuckInDLQ: an event of the order waits in a consumer's dead
	// letters.
	StuckInDLQ Kind = "STUCK_IN_DLQ"
	// StuckInOutbox: a message of the order has waited for its relay past
	// the convergence deadline.
	StuckInOutbox Kind = "STUCK_IN_OUTBOX"
	// BusinessRejection: a service refused the order for a business reason
	// (the stock was not there) and the order has not given the customer's
	// money back: the compensation (docs/decisions.md, A shortage is
	// compensated) did not happen within the deadline.
	BusinessRejection Kind = "BUSINESS_REJECTION"
	// InFlight: a message of the order still waits in an outbox, within
	// the convergence deadline. Not a fault, so a run never records it;
	// but an effect is on its way, so a check of the order now does not
	// call it converged.
	InFlight Kind = "IN_FLIGHT"
)

// ActionType is how a finding is compensated.
type ActionType string

// The compensations. Each goes through the owning service's API.
const (
	// ActionRefund refunds the rest of a payment through the payment
	// service's refund path.
	ActionRefund ActionType = "REFUND"
	// ActionRepublish makes outbox rows of the order (or of its payment's
	// callbacks) due again: the relay sends them under their original
	// eventId, and whoever applied them already deduplicates them.
	ActionRepublish ActionType = "REPUBLISH"
	// ActionReplay replays a dead letter to its original topic with its
	// original eventId.
	ActionReplay ActionType = "REPLAY"
	// ActionFence raises the order's version at the order service to the
	// highest any consumer has applied (POST /admin/orders/{id}/version),
	// so its next change gets a version no consumer ignores as stale.
	ActionFence ActionType = "FENCE"
	// ActionManualReview: no safe automatic action exists.
	ActionManualReview ActionType = "MANUAL_REVIEW"
)

// Action is the compensation of a finding. Key names it: the same facts
// give the same key, so an action is taken once however many runs find its
// finding.
type Action struct {
	Type    ActionType
	Service string
	Key     string
	// EventIDs are the outbox rows to republish, oldest first.
	EventIDs []string
	// DeadLetterID is the dead letter to replay.
	DeadLetterID int64
	// AtLeast is the version a fence raises the order to.
	AtLeast int64
	// PaymentID, RefundID and Amount are the refund to make.
	PaymentID string
	RefundID  string
	Amount    decimal.Decimal
	// Reason says why a person must look (MANUAL_REVIEW) or why the money
	// goes back (REFUND).
	Reason string
}

// Finding is one disagreement between the order and a service.
type Finding struct {
	OrderID  string
	Kind     Kind
	Service  string
	Expected string
	Actual   string
	Action   Action
}

// Converged reports whether findings leave nothing to converge: every
// service has reached what the order's state requires. A business
// rejection is not convergence: the order is converged once its shortage
// is compensated, its money back and the order cancelled.
func Converged(findings []Finding) bool {
	return len(findings) == 0
}

// Compare checks what every service knows about the order against what the
// order's state requires of it, and returns the disagreements with the
// compensation of each. Outbox rows created before stuckBefore (now minus
// the convergence deadline) that are still pending are stuck; anything else
// in flight is judged by the caller's choice of orders (a run checks orders
// whose last change is older than the deadline).
func Compare(f Facts, stuckBefore time.Time) []Finding {
	o := f.Order
	if !o.Found {
		return nil
	}
	c := comparison{facts: f, order: o}
	c.outboxes(stuckBefore)
	c.deadLetters()
	c.payment()
	c.inventory()
	c.points()
	c.notifications()
	return c.findings
}

// InFlightNow returns what of the order is still on its way: one finding
// per outbox holding rows sent to no one yet and created at or after
// stuckBefore (older ones are StuckInOutbox findings of Compare). Compare
// leaves them out, because a run acting on them would compensate what the
// relay is about to deliver; a check of the order now adds them, because a
// callback in the payment service's outbox (the order not yet paid, or its
// refund not yet recorded) is an effect nobody has seen yet, and the order
// is not converged until it lands.
func InFlightNow(f Facts, stuckBefore time.Time) []Finding {
	if !f.Order.Found {
		return nil
	}
	var out []Finding
	for _, box := range []struct {
		service string
		rows    []OutboxRow
	}{{ServiceOrder, f.Order.Events}, {ServicePayment, f.Payment.Outbox}} {
		var seen []string
		for _, r := range box.rows {
			if r.Status == "PENDING" && !r.CreatedAt.Before(stuckBefore) {
				seen = append(seen, fmt.Sprintf("%s v%d", r.EventType, r.AggregateVersion))
			}
		}
		if len(seen) > 0 {
			out = append(out, Finding{OrderID: f.Order.ID, Kind: InFlight, Service: box.service,
				Expected: "every message sent", Actual: fmt.Sprintf("%d pending within the deadline (%s)", len(seen), strings.Join(seen, ", "))})
		}
	}
	return out
}

type comparison struct {
	facts    Facts
	order    Order
	findings []Finding
	// orderStuck: some of the order's events have not left its outbox, so
	// no consumer can have applied them.
	orderStuck bool
	// dead: the consumers holding a dead letter of the order.
	dead map[string]bool
}

func (c *comparison) add(kind Kind, service, expected, actual string, a Action) {
	c.findings = append(c.findings, Finding{OrderID: c.order.ID, Kind: kind, Service: service,
		Expected: expected, Actual: actual, Action: a})
}

// explained reports whether a missing effect at service is already
// reported with its cause: the order's events are stuck in its outbox, or
// the service dead-lettered one. Its compensation is the cause's.
func (c *comparison) explained(service string) bool {
	return c.orderStuck || c.dead[service]
}

// republish is the compensation of a missing effect: every event of the
// order again, oldest first. A consumer that lost its effect may also have
// lost its version (a database restored from an old backup), so it needs
// the chain from the start; the others deduplicate every copy.
func (c *comparison) republish() Action {
	ids := make([]string, 0, len(c.order.Events))
	for _, e := range c.order.Events {
		ids = append(ids, e.EventID)
	}
	return Action{Type: ActionRepublish, Service: ServiceOrder, EventIDs: ids,
		Key: fmt.Sprintf("%s:%s:%s:v%d", ActionRepublish, ServiceOrder, c.order.ID, c.order.Version)}
}

func manual(reason string) Action {
	return Action{Type: ActionManualReview, Reason: reason}
}

func (c *comparison) outboxes(stuckBefore time.Time) {
	for _, box := range []struct {
		service string
		rows    []OutboxRow
	}{{ServiceOrder, c.order.Events}, {ServicePayment, c.facts.Payment.Outbox}} {
		var ids, seen []string
		attempts := 0
		for _, r := range box.rows {
			if r.Status == "PENDING" && r.CreatedAt.Before(stuckBefore) {
				ids = append(ids, r.EventID)
				seen = append(seen, fmt.Sprintf("%s v%d", r.EventType, r.AggregateVersion))
				attempts = max(attempts, r.Attempts)
			}
		}
		if len(ids) == 0 {
			continue
		}
		if box.service == ServiceOrder {
			c.orderStuck = true
		}
		c.add(StuckInOutbox, box.service, "every message sent within the deadline",
			fmt.Sprintf("%d pending (%s), up to %d attempts", len(ids), strings.Join(seen, ", "), attempts),
			Action{Type: ActionRepublish, Service: box.service, EventIDs: ids,
				Key: fmt.Sprintf("%s:%s:%s:%s:a%d", ActionRepublish, box.service, c.order.ID, ids[0], attempts)})
	}
}

func (c *comparison) deadLetters() {
	c.dead = map[string]bool{}
	for _, service := range Consumers() {
		for _, d := range c.facts.deadLetters(service) {
			c.dead[service] = true
			a := Action{Type: ActionReplay, Service: service, DeadLetterID: d.ID,
				Key: fmt.Sprintf("%s:%s:%d", ActionReplay, service, d.ID)}
			if d.ReplayedBefore {
				// Replayed once and dead-lettered again: the cause is not
				// fixed, and a replay loop fixes nothing.
				a = manual(fmt.Sprintf("%s came back to the DLQ after a replay: fix the cause, then replay dead letter %d", d.EventID, d.ID))
			}
			c.add(StuckInDLQ, service, fmt.Sprintf("%s %s applied", d.EventType, d.EventID),
				fmt.Sprintf("dead letter %d: %s %s (%s)", d.ID, d.EventType, d.ErrorClass, d.FailureReason), a)
		}
	}
}

func (c *comparison) payment() {
	o, p := c.order, c.facts.Payment
	if !o.Paid() {
		c.unpaidPayment()
		return
	}
	want := fmt.Sprintf("payment %s of %s %s", o.PaymentID, money(o.Amount), o.Currency)
	switch {
	case !p.Found || p.PaymentID != o.PaymentID:
		c.add(MissingEffect, ServicePayment, want, "no such payment",
			manual("the order was paid by a payment the payment service does not hold"))
		return
	case !p.Amount.Equal(o.Amount) || p.Currency != o.Currency:
		c.add(AmountMismatch, ServicePayment, want, fmt.Sprintf("payment of %s %s", money(p.Amount), p.Currency),
			manual("the order and its payment disagree on the amount"))
		return
	}
	refunded := o.RefundedAmount
	pending := o.pendingRefund()
	switch {
	case p.Refunded.Equal(refunded) && statusOf(p.Amount, p.Refunded) == p.Status:
		if pending != nil && !c.dead[ServicePayment] && !c.orderStuck && !refundInLedger(p, pending.ID) {
			// The refund request never reached the payment service.
			c.add(MissingEffect, ServicePayment, fmt.Sprintf("refund %s of %s executed or rejected", pending.ID, money(pending.Amount)),
				"no such refund in the ledger", c.republish())
		}
	case pending != nil && p.Refunded.Equal(refunded.Add(pending.Amount)):
		// The payment service refunded it; the order has not heard.
		if !hasPending(p.Outbox) {
			c.add(MissingEffect, ServiceOrder, fmt.Sprintf("refund %s of %s recorded", pending.ID, money(pending.Amount)),
				fmt.Sprintf("order %s, payment refunded %s", o.Status, money(p.Refunded)), c.republishCallbacks())
		}
	default:
		c.add(AmountMismatch, ServicePayment, fmt.Sprintf("%s, refunded %s", statusOf(o.Amount, refunded), money(refunded)),
			fmt.Sprintf("%s, refunded %s", p.Status, money(p.Refunded)),
			manual("the order and its payment disagree on what was refunded"))
	}
}

// unpaidPayment checks the payment of an order that never took one: there
// is none, or it went back in full.
func (c *comparison) unpaidPayment() {
	o, p := c.order, c.facts.Payment
	if !p.Found {
		return
	}
	refundable := p.Amount.Sub(p.Refunded)
	if !refundable.IsPositive() {
		return
	}
	ret := o.returnOf(p.PaymentID)
	if o.Status == StatusPendingPayment && ret == nil {
		// Paid, and the callback has not changed the order yet.
		if !hasPending(p.Outbox) {
			c.add(MissingEffect, ServiceOrder, fmt.Sprintf("PAID by %s", p.PaymentID), o.Status, c.republishCallbacks())
		}
		return
	}
	if c.dead[ServicePayment] {
		return // the return is in the payment service's dead letters
	}
	// The refund id of a return is a function of the payment: this refund
	// and the one the order's OrderPaymentRejected asks for, now or later,
	// are one and the same, made once.
	refundID := rules.ReturnRefundID(p.PaymentID)
	if ret != nil {
		refundID = ret.ID
	}
	c.add(PaymentForUnpayableOrder, ServicePayment,
		fmt.Sprintf("payment %s returned in full (order %s)", p.PaymentID, o.Status),
		fmt.Sprintf("%s, refunded %s of %s %s", p.Status, money(p.Refunded), money(p.Amount), p.Currency),
		Action{Type: ActionRefund, Service: ServicePayment, PaymentID: p.PaymentID, RefundID: refundID, Amount: refundable,
			Reason: string(PaymentForUnpayableOrder), Key: fmt.Sprintf("%s:%s:%s", ActionRefund, ServicePayment, p.PaymentID)})
}

// republishCallbacks re-sends the payment service's callbacks of the order:
// the order service deduplicates those it applied by their callback id.
func (c *comparison) republishCallbacks() Action {
	ids := make([]string, 0, len(c.facts.Payment.Outbox))
	for _, r := range c.facts.Payment.Outbox {
		ids = append(ids, r.EventID)
	}
	return Action{Type: ActionRepublish, Service: ServicePayment, EventIDs: ids,
		Key: fmt.Sprintf("%s:%s:%s:v%d:n%d", ActionRepublish, ServicePayment, c.order.ID, c.order.Version, len(ids))}
}

func (c *comparison) inventory() {
	o, inv := c.order, c.facts.Inventory
	if !o.Paid() {
		if inv.Status != InventoryNone && inv.Status != "" {
			c.add(ExtraEffect, ServiceInventory, "NONE: the order was never paid", inv.Status,
				manual("stock moved for an order that was never paid"))
		}
		return
	}
	want := fmt.Sprintf("DEDUCTED %s", lines(orderLines(o.Items)))
	switch inv.Status {
	case InventoryNone, "":
		if !c.explained(ServiceInventory) {
			c.add(MissingEffect, ServiceInventory, want, InventoryNone, c.republish())
		}
		return
	case InventoryRejected:
		if o.RefundedAmount.GreaterThanOrEqual(o.Amount) {
			return // nothing was deducted, and the money is back: compensated
		}
		c.add(BusinessRejection, ServiceInventory,
			fmt.Sprintf("%s, or the order cancelled with its %s %s refunded", want, money(o.Amount), o.Currency),
			fmt.Sprintf("REJECTED (%s), order %s, refunded %s", inv.Reason, o.Status, money(o.RefundedAmount)),
			manual("the stock could not cover the paid order and the order has not given the money back: "+
				"see the inventory service's STOCK_REJECTED callback in its outbox and the order's refunds"))
		return
	}
	if d := diff(orderLines(o.Items), inv.Items); d != "" {
		c.add(ExtraEffect, ServiceInventory, want, fmt.Sprintf("%s %s", inv.Status, lines(inv.Items)),
			manual("inventory deducted other goods than the order holds: "+d))
		return
	}
	back, returned := quantities(inv.Restocked), quantities(o.ReturnedItems)
	wantBack := fmt.Sprintf("%s back in stock", lines(o.ReturnedItems))
	gotBack := fmt.Sprintf("%s %s back", inv.Status, lines(inv.Restocked))
	for _, it := range o.Items {
		switch {
		case back[it.SKU] < returned[it.SKU]:
			if !c.explained(ServiceInventory) {
				c.add(MissingEffect, ServiceInventory, wantBack, gotBack, c.republish())
			}
			return
		case back[it.SKU] > returned[it.SKU]:
			c.add(ExtraEffect, ServiceInventory, wantBack, gotBack, manual("restocked goods that were never returned"))
			return
		}
	}
}

func (c *comparison) points() {
	o, entries := c.order, c.facts.Points.Entries
	if !o.Paid() {
		if len(entries) > 0 {
			c.add(ExtraEffect, ServicePoints, "no points: the order was never paid", fmt.Sprintf("%d ledger entries", len(entries)),
				manual("points for an order that was never paid"))
		}
		return
	}
	var earns, reversals int
	var points int64
	reversed := decimal.Zero
	var earned decimal.Decimal
	for _, e := range entries {
		points += e.Points
		switch e.Type {
		case "EARN":
			earns++
			earned = e.Amount
		case "REVERSAL":
			reversals++
			reversed = reversed.Add(e.Amount)
		}
	}
	worth := rules.PointsFor(o.Amount, o.RefundedAmount)
	want := fmt.Sprintf("%d points (earned on %s, %s refunded)", worth, money(o.Amount), money(o.RefundedAmount))
	got := fmt.Sprintf("%d points (%d earn, %d reversals of %s)", points, earns, reversals, money(reversed))
	switch {
	case earns == 0:
		if !c.explained(ServicePoints) {
			c.add(MissingEffect, ServicePoints, want, got, c.republish())
		}
	case earns > 1:
		c.add(ExtraEffect, ServicePoints, want, got, manual("the order earned points more than once"))
	case !earned.Equal(o.Amount):
		c.add(AmountMismatch, ServicePoints, want, got, manual("points were earned on another amount than the order's"))
	case reversed.LessThan(o.RefundedAmount):
		if !c.explained(ServicePoints) {
			c.add(MissingEffect, ServicePoints, want, got, c.republish())
		}
	case reversed.GreaterThan(o.RefundedAmount):
		c.add(ExtraEffect, ServicePoints, want, got, manual("points were reversed for more than was refunded"))
	case points != worth:
		c.add(AmountMismatch, ServicePoints, want, got, manual("the ledger adds up to another figure than the points rule"))
	}
}

// noticeOf is the notification each customer-facing event is told with.
func noticeOf(eventType string) string {
	switch eventType {
	case "OrderPaid":
		return "ORDER_PAID"
	case "OrderRefunded":
		return "ORDER_REFUNDED"
	case "OrderRefundRejected":
		return "REFUND_REJECTED"
	case "OrderPaymentReturned":
		return "PAYMENT_RETURNED"
	}
	return ""
}

func (c *comparison) notifications() {
	want := map[string]int{}
	var wantKinds []string
	for _, e := range c.order.Events {
		if k := noticeOf(e.EventType); k != "" {
			want[k]++
			wantKinds = append(wantKinds, k)
		}
	}
	got := map[string]int{}
	var gotKinds []string
	for _, n := range c.facts.Notifications.Sent {
		got[n.Kind]++
		gotKinds = append(gotKinds, n.Kind)
	}
	expected, actual := kinds(wantKinds), kinds(gotKinds)
	for _, k := range sortedKeys(want, got) {
		switch {
		case got[k] < want[k]:
			if !c.explained(ServiceNotification) {
				c.add(MissingEffect, ServiceNotification, expected, actual, c.republish())
			}
			return
		case got[k] > want[k]:
			c.add(ExtraEffect, ServiceNotification, expected, actual, manual("the customer was told more than once"))
			return
		}
	}
}

// statusOf is the payment status its amounts make.
func statusOf(amount, refunded decimal.Decimal) string {
	switch {
	case refunded.IsZero():
		return PaymentSucceeded
	case refunded.LessThan(amount):
		return PaymentPartiallyRefunded
	}
	return PaymentRefunded
}

func refundInLedger(p Payment, refundID string) bool {
	for _, r := range p.Refunds {
		if r.ID == refundID {
			return true
		}
	}
	return false
}

func hasPending(rows []OutboxRow) bool {
	for _, r := range rows {
		if r.Status == "PENDING" {
			return true
		}
	}
	return false
}

func money(d decimal.Decimal) string { return d.StringFixed(rules.MoneyPlaces) }

func orderLines(items []OrderLine) []Line {
	out := make([]Line, len(items))
	for i, it := range items {
		out[i] = it.Line
	}
	return out
}

func quantities(ls []Line) map[string]int {
	out := make(map[string]int, len(ls))
	for _, l := range ls {
		out[l.SKU] += l.Quantity
	}
	return out
}

// diff describes how two sets of lines differ; empty when they hold the
// same quantities.
func diff(want, got []Line) string {
	w, g := quantities(want), quantities(got)
	var out []string
	for _, sku := range sortedKeys(w, g) {
		if w[sku] != g[sku] {
			out = append(out, fmt.Sprintf("%s %d, want %d", sku, g[sku], w[sku]))
		}
	}
	return strings.Join(out, "; ")
}

func lines(ls []Line) string {
	if len(ls) == 0 {
		return "nothing"
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s×%d", l.SKU, l.Quantity)
	}
	return strings.Join(parts, " ")
}

func kinds(ks []string) string {
	if len(ks) == 0 {
		return "no notification"
	}
	return strings.Join(ks, ", ")
}

func sortedKeys(maps ...map[string]int) []string {
	var keys []string
	for _, m := range maps {
		for k := range m {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}
