package drill

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/payment/paymentapi"
)

// The refund cases: a refund the customer's client sends twice, an
// operator's refund, and a refund whose message reaches the notification
// service after a newer one. Each is registered with the drill it belongs
// to (duplicate, reconcile, replay).

// refundUnitPrice and refundQuantity make the refund cases' order: 2 units
// at 40.00, 80.00 paid, for a SKU of its own with refundStock in stock.
const (
	refundUnitPrice = "40.00"
	refundQuantity  = 2
	refundStock     = 10
)

// refundBody and refundLine are a customer's refund request and the goods
// it returns.
type (
	refundBody = suiteapi.Refund
	refundLine = suiteapi.Line
)

// refund asks for a refund of the order under a key of its own, as a
// client that may retry does, and waits until the order is status at
// version: the refund settled.
func (s *session) refund(orderID, status string, version int64, body refundBody) {
	a := must(s.api.Refund(s.ctx, orderID, must(suiteapi.NewIdempotencyKey()), body))
	if a.BusinessCode != suiteapi.Success {
		fail("refund of %s %v answered %s %s", body.Amount, body.Items, a.BusinessCode, a.Message)
	}
	s.waitOrder(orderID, status, version)
}

// waitOrder waits until the order is status at version.
func (s *session) waitOrder(orderID, status string, version int64) orderView {
	var o orderView
	s.waitUntil(fmt.Sprintf("%s %s v%d", orderID, status, version), func() (_ string, _ bool, err error) {
		o, err = s.api.Order(s.ctx, orderID)
		return fmt.Sprintf("order %s v%d", o.Status, o.Version), o.Status == status && o.Version == version, err
	})
	return o
}

// payment reads the payment of an order.
func (s *session) payment(orderID string) paymentapi.PaymentView {
	var p paymentapi.PaymentView
	check(s.api.Call(s.ctx, Payment, "GET", "/payments/orders/"+url.PathEscape(orderID), nil, &p))
	return p
}

// refundState is where an order's refunds stand across the services.
type refundState struct {
	order     orderView
	payment   paymentapi.PaymentView
	stock     stock
	effects   effects
	refundIDs []string
}

func (r refundState) String() string {
	return fmt.Sprintf("order %s refunded %s (%d refunds), payment %s refunded %s, stock %d/%d, inventory %s, ledger %d, notifications %d",
		r.order.Status, r.order.RefundedAmount, len(r.order.Refunds), r.payment.Status, r.payment.Refunded, r.stock.Available, r.stock.Deducted,
		r.effects.Inventory, len(r.effects.Ledger), len(r.effects.Notifications))
}

// refundStateOf reads the order's refunds from every service.
func (s *session) refundStateOf(o drillOrder) refundState {
	r := refundState{order: s.order(o.id), payment: s.payment(o.id), stock: s.stock(o.sku), effects: s.effects(o.id)}
	for _, rf := range r.order.Refunds {
		r.refundIDs = append(r.refundIDs, rf.RefundID)
	}
	return r
}

// duplicateRetriedRefund: a client that got no answer sends its command
// again. With an Idempotency-Key it is one refund; without one it is two,
// and the verdict says so, since only the key makes a retry safe.
func duplicateRetriedRefund(s *session) string {
	start := time.Now()
	keyed := s.refundSentTwice("-keyed", must(suiteapi.NewIdempotencyKey()), 5, refundWant{"30.00", "PARTIALLY_RESTOCKED", refundStock - 1, 1, 2, 2})
	unkeyed := s.refundSentTwice("-unkeyed", "", 7, refundWant{"60.00", "RESTOCKED", refundStock, 0, 3, 3})
	s.converged = time.Since(start)
	return fmt.Sprintf("with one key: one refund %s, the retry answered again (Idempotent-Replayed) with it: %s; "+
		"WITHOUT a key the retry is a second refund (%v): %s — a client retrying without a key is refunded twice, "+
		"which is why the README (Retrying safely) tells clients to send one; %s",
		keyed.refundIDs[0], keyed, unkeyed.refundIDs, unkeyed, s.reconcileClean(keyed.order.OrderID, unkeyed.order.OrderID))
}

// refundWant is where an order of 2 × 40.00 stands after the refund sent
// twice.
type refundWant struct {
	refunded            string
	inventory           string
	available, deducted int
	ledger, notes       int
}

// refundSentTwice pays an order and sends the same refund of 30.00 and a
// unit twice with key ("" sends none), the second once the first has
// completed, as a client retrying late does. The order ends
// PARTIALLY_REFUNDED at version; every service agrees on want.
func (s *session) refundSentTwice(suffix, key string, version int64, want refundWant) refundState {
	o := s.paidOrder(suffix, refundQuantity, refundUnitPrice, refundStock)
	body := suiteapi.Refund{Amount: "30.00", Items: []suiteapi.Line{{SKU: o.sku, Quantity: 1}}}
	with := "without a key"
	if key != "" {
		with = "with a key"
	}
	var answers [2]suiteapi.RefundAnswer
	for i := range answers {
		a := must(s.api.Refund(s.ctx, o.id, key, body))
		if a.BusinessCode != suiteapi.Success || suiteapi.AmountText(a.Amount) != "30.00" {
			fail("%s: refund %d answered %s %s %s, want SUCCESS 30.00", with, i+1, a.BusinessCode, suiteapi.AmountText(a.Amount), a.Message)
		}
		answers[i] = a
		checkf(retryAnswered(key != "", answers[:i+1]), "%s", with)
		// Each refund completes (v5, v7) before the next request: the
		// retry finds the order able to refund again, and one answered
		// again leaves it where it was.
		s.waitOrder(o.id, "PARTIALLY_REFUNDED", min(version, int64(5+2*i)))
	}
	s.waitEffects(o.id, want.inventory, want.ledger, want.notes)
	s.waitConverged(o.id)
	st := s.refundStateOf(o)
	refunds := 1
	if key == "" {
		refunds = 2
	}
	if st.order.Status != "PARTIALLY_REFUNDED" || st.order.Version != version || st.order.RefundedAmount.String() != want.refunded ||
		len(st.order.Refunds) != refunds || st.payment.Status != "PARTIALLY_REFUNDED" || st.payment.Refunded != want.refunded ||
		st.stock.Available != want.available || st.stock.Deducted != want.deducted {
		fail("%s: %s; want order and payment PARTIALLY_REFUNDED %s (v%d, %d refunds), stock %d/%d",
			with, st, want.refunded, version, refunds, want.available, want.deducted)
	}
	return st
}

// retryAnswered checks the answers so far of a refund sent twice: the
// first is not marked as given again; with a key the retry is the first
// answer again, without one a refund of its own.
func retryAnswered(keyed bool, answers []suiteapi.RefundAnswer) error {
	first := answers[0]
	switch {
	case first.Replayed:
		return fmt.Errorf("the first answer is marked %s", suiteapi.ReplayedHeader)
	case len(answers) < 2:
		return nil
	case keyed && (!answers[1].Replayed || answers[1].RefundID != first.RefundID):
		return fmt.Errorf("the retry with the same key answered refund %s (replayed %v), want the first's %s again, marked %s",
			answers[1].RefundID, answers[1].Replayed, first.RefundID, suiteapi.ReplayedHeader)
	case !keyed && (answers[1].Replayed || answers[1].RefundID == first.RefundID):
		return fmt.Errorf("the retry without a key answered refund %s (replayed %v), want a second refund",
			answers[1].RefundID, answers[1].Replayed)
	}
	return nil
}

// reconcileOperatorRefund: the operator's refund through the payment
// service, recorded by the order that holds the payment.
func reconcileOperatorRefund(s *session) string {
	o := s.paidOrder("", refundQuantity, refundUnitPrice, refundStock)
	operator := requester(s)
	path := "/admin/payments/orders/" + url.PathEscape(o.id) + "/refunds"
	refund := suiteapi.OperatorRefund{RefundID: "R-" + s.t.RunID + "-" + s.slug, Amount: "10.00",
		Items: []suiteapi.Line{{SKU: o.sku, Quantity: 1}}, Reason: "damaged in transit"}

	// Without X-Operator: refused, nothing changes.
	before := s.refundStateOf(o)
	var refused *StatusError
	_, err := s.api.Do(s.ctx, Payment, http.MethodPost, path, nil, refund, nil)
	if !errors.As(err, &refused) || refused.Status != http.StatusBadRequest || refused.BusinessCode != "OPERATOR_REQUIRED" {
		fail("an operator refund without X-Operator answered %v, want 400 OPERATOR_REQUIRED", err)
	}
	if after := s.refundStateOf(o); after.String() != before.String() || after.order.Version != before.order.Version {
		fail("the refused refund changed things: %s -> %s", before, after)
	}

	start := time.Now()
	a := must(s.api.OperatorRefund(s.ctx, o.id, operator, refund))
	if a.BusinessCode != suiteapi.Success || a.Status != "REQUESTED" || a.RefundID != refund.RefundID {
		fail("operator refund answered %+v, want SUCCESS REQUESTED %s (the order holds the payment)", a, refund.RefundID)
	}
	s.waitOrder(o.id, "PARTIALLY_REFUNDED", 5)
	s.waitEffects(o.id, "PARTIALLY_RESTOCKED", 2, 2)
	s.waitConverged(o.id)
	s.converged = time.Since(start)
	st := s.refundStateOf(o)
	if len(st.order.Refunds) != 1 {
		fail("%s; want one refund", st)
	}
	r := st.order.Refunds[0]
	if r.RefundID != refund.RefundID || r.RequestedBy != operator || r.Reason != refund.Reason || r.Status != "SUCCEEDED" ||
		st.order.RefundedAmount.String() != "10.00" || st.payment.Status != "PARTIALLY_REFUNDED" || st.payment.Refunded != "10.00" ||
		st.stock.Available != refundStock-1 || st.stock.Deducted != 1 {
		fail("refund %+v; %s; want %s SUCCEEDED requested by %s, order and payment PARTIALLY_REFUNDED 10.00, stock %d/1",
			r, st, refund.RefundID, operator, refundStock-1)
	}
	return fmt.Sprintf("without X-Operator 400 OPERATOR_REQUIRED, nothing changed; with it REQUESTED, recorded by the order as %s requested by %s (%q): %s; %s",
		r.RefundID, r.RequestedBy, r.Reason, st, s.reconcileClean(o.id))
}

// replayLateRefund: the first refund's OrderRefunded is dead-lettered by
// the notification service while a fault lasts; a second refund is told
// meanwhile; the first, replayed, is older than what notification applied.
// It must still be told (docs/decisions.md, Late facts are told).
func replayLateRefund(s *session) string {
	o := s.paidOrder("", refundQuantity, refundUnitPrice, refundStock)
	// Whatever happens, notification is healthy again when the case ends.
	fix := s.arm(Notification, "notification.apply", "error", 0)
	s.refund(o.id, "PARTIALLY_REFUNDED", 5, refundBody{Amount: "10.00"})
	dl := s.waitDeadLetter(Notification, o.id)
	s.checkMetadata(Notification, dl, s.orderEvent(o.id, "OrderRefunded").EventID, "RETRYABLE", "", s.t.RetryMaxAttempts)
	fix()

	s.refund(o.id, "PARTIALLY_REFUNDED", 7, refundBody{Amount: "20.00"})
	// Paid and the second refund told; the first is in the DLQ.
	s.waitEffects(o.id, "DEDUCTED", 3, 2)

	start := time.Now()
	s.replay(Notification, dl, "APPLIED", "replay of the first refund (its refund told late, not IGNORED_STALE)")
	s.waitEffects(o.id, "DEDUCTED", 3, 3)
	s.waitConverged(o.id)
	s.converged = time.Since(start)
	var told []string
	for _, n := range s.effects(o.id).Notifications {
		told = append(told, n.Kind)
		if n.EventID == dl.EventID && !strings.Contains(n.Body, "10.00") {
			fail("the late refund was told as %q, want its 10.00", n.Body)
		}
	}
	if !slices.ContainsFunc(s.effects(o.id).Notifications, func(n suiteapi.Notice) bool { return n.EventID == dl.EventID }) {
		fail("notifications %v: none for the replayed %s", told, dl.EventID)
	}
	return fmt.Sprintf("first refund's OrderRefunded dead-lettered by notification after %d attempts; second refund told; replay %d APPLIED for the original %s; notifications %v; audit: %s; %s",
		dl.Attempts, dl.ID, dl.EventID, told, s.checkAudit(Notification, dl, "APPLIED"), s.reconcileClean(o.id))
}
