package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// The refund cases: a refund the customer's client sends twice, an
// operator's refund, and a refund whose message reaches the notification
// service after a newer one. Each is registered with the drill it belongs
// to (duplicate, reconcile, replay).

// refundUnitPrice and refundQuantity make the refund cases' order: 2 units
// at 40.00, 80.00 paid.
const (
	refundUnitPrice = "40.00"
	refundQuantity  = 2
	refundStock     = 10
)

// paidForRefund places and pays an order of 2 × 40.00 for a SKU of its own
// (10 in stock) and waits until every consumer has applied the payment.
func paidForRefund(s *session, suffix string) (orderID, sku string, err error) {
	orderID, sku, _, err = s.paidOrder(suffix, refundQuantity, refundUnitPrice, refundStock)
	return orderID, sku, err
}

// refundBody and refundLine are a customer's refund request and the goods
// it returns.
type (
	refundBody = suiteapi.Refund
	refundLine = suiteapi.Line
)

// refund asks for a refund of the order under a key of its own, as a
// client that may retry does, and waits until the order is status at
// version: the refund settled.
func (s *session) refund(orderID, status string, version int64, body refundBody) (suiteapi.RefundAnswer, error) {
	key, err := suiteapi.NewIdempotencyKey()
	if err != nil {
		return suiteapi.RefundAnswer{}, err
	}
	a, err := s.api.Refund(s.ctx, orderID, key, body)
	if err != nil {
		return a, err
	}
	if a.BusinessCode != suiteapi.Success {
		return a, fmt.Errorf("refund of %s %v answered %s %s", body.Amount, body.Items, a.BusinessCode, a.Message)
	}
	_, err = s.waitOrder(orderID, status, version)
	return a, err
}

// waitOrder waits until the order is status at version.
func (s *session) waitOrder(orderID, status string, version int64) (orderView, error) {
	var o orderView
	_, err := s.waitUntil(fmt.Sprintf("%s %s v%d", orderID, status, version), func() (bool, error) {
		var err error
		o, err = s.api.Order(s.ctx, orderID)
		return o.Status == status && o.Version == version, err
	})
	if err != nil {
		return o, fmt.Errorf("%w; order %s v%d", err, o.Status, o.Version)
	}
	return o, nil
}

// refundState is where an order's refunds stand across the services.
type refundState struct {
	order     orderView
	payment   string // the payment's status
	refunded  string // what the payment gave back
	stock     stock
	effects   effects
	refundIDs []string
}

func (r refundState) String() string {
	return fmt.Sprintf("order %s refunded %s (%d refunds), payment %s refunded %s, stock %d/%d, inventory %s, ledger %d, notifications %d",
		r.order.Status, r.order.RefundedAmount, len(r.order.Refunds), r.payment, r.refunded, r.stock.Available, r.stock.Deducted,
		r.effects.Inventory, len(r.effects.Ledger), len(r.effects.Notifications))
}

// refundStateOf reads the order's refunds from every service.
func (s *session) refundStateOf(orderID, sku string) (refundState, error) {
	var r refundState
	var errs [4]error
	r.order, errs[0] = s.api.Order(s.ctx, orderID)
	r.payment, r.refunded, errs[1] = s.payment(orderID)
	r.stock, errs[2] = s.api.Stock(s.ctx, sku)
	r.effects, errs[3] = s.effects(orderID)
	for _, rf := range r.order.Refunds {
		r.refundIDs = append(r.refundIDs, rf.RefundID)
	}
	return r, errors.Join(errs[:]...)
}

// duplicateRetriedRefund: a client that got no answer sends its command
// again. With an Idempotency-Key it is one refund; without one it is two,
// and the verdict says so, since only the key makes a retry safe.
func duplicateRetriedRefund(s *session) (string, error) {
	key, err := suiteapi.NewIdempotencyKey()
	if err != nil {
		return "", err
	}
	start := time.Now()
	keyed, err := refundSentTwice(s, "-keyed", key, 5, refundWant{"30.00", "PARTIALLY_RESTOCKED", refundStock - 1, 1, 2, 2})
	if err != nil {
		return "", fmt.Errorf("with a key: %w", err)
	}
	unkeyed, err := refundSentTwice(s, "-unkeyed", "", 7, refundWant{"60.00", "RESTOCKED", refundStock, 0, 3, 3})
	if err != nil {
		return "", fmt.Errorf("without a key: %w", err)
	}
	s.converged = time.Since(start)
	run, err := s.reconcileClean(keyed.order.OrderID, unkeyed.order.OrderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("with one key: one refund %s, the retry answered again (Idempotent-Replayed) with it: %s; "+
		"WITHOUT a key the retry is a second refund (%v): %s — a client retrying without a key is refunded twice, "+
		"which is why the README (Retrying safely) tells clients to send one; %s",
		keyed.refundIDs[0], keyed, unkeyed.refundIDs, unkeyed, run), nil
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
func refundSentTwice(s *session, suffix, key string, version int64, want refundWant) (refundState, error) {
	orderID, sku, err := paidForRefund(s, suffix)
	if err != nil {
		return refundState{}, err
	}
	body := suiteapi.Refund{Amount: "30.00", Items: []suiteapi.Line{{SKU: sku, Quantity: 1}}}
	var answers [2]suiteapi.RefundAnswer
	for i := range answers {
		a, err := s.api.Refund(s.ctx, orderID, key, body)
		if err != nil {
			return refundState{}, err
		}
		if a.BusinessCode != suiteapi.Success || suiteapi.AmountText(a.Amount) != "30.00" {
			return refundState{}, fmt.Errorf("refund %d answered %s %s %s, want SUCCESS 30.00", i+1, a.BusinessCode, suiteapi.AmountText(a.Amount), a.Message)
		}
		answers[i] = a
		if err := retryAnswered(key != "", answers[:i+1]); err != nil {
			return refundState{}, err
		}
		// Each refund completes (v5, v7) before the next request: the
		// retry finds the order able to refund again, and one answered
		// again leaves it where it was.
		if _, err := s.waitOrder(orderID, "PARTIALLY_REFUNDED", min(version, int64(5+2*i))); err != nil {
			return refundState{}, err
		}
	}
	if _, err := s.waitEffects(orderID, want.inventory, want.ledger, want.notes); err != nil {
		return refundState{}, err
	}
	if _, err := s.waitConverged(orderID); err != nil {
		return refundState{}, err
	}
	st, err := s.refundStateOf(orderID, sku)
	if err != nil {
		return st, err
	}
	refunds := 1
	if key == "" {
		refunds = 2
	}
	if st.order.Status != "PARTIALLY_REFUNDED" || st.order.Version != version || st.order.RefundedAmount.String() != want.refunded ||
		len(st.order.Refunds) != refunds || st.payment != "PARTIALLY_REFUNDED" || st.refunded != want.refunded ||
		st.stock.Available != want.available || st.stock.Deducted != want.deducted {
		return st, fmt.Errorf("%s; want order and payment PARTIALLY_REFUNDED %s (v%d, %d refunds), stock %d/%d",
			st, want.refunded, version, refunds, want.available, want.deducted)
	}
	return st, nil
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
func reconcileOperatorRefund(s *session) (string, error) {
	orderID, sku, err := paidForRefund(s, "")
	if err != nil {
		return "", err
	}
	operator := requester(s)
	path := "/admin/payments/orders/" + url.PathEscape(orderID) + "/refunds"
	refund := suiteapi.OperatorRefund{RefundID: "R-" + s.t.RunID + "-" + s.slug, Amount: "10.00",
		Items: []suiteapi.Line{{SKU: sku, Quantity: 1}}, Reason: "damaged in transit"}

	// Without X-Operator: refused, nothing changes.
	before, err := s.refundStateOf(orderID, sku)
	if err != nil {
		return "", err
	}
	var refused struct {
		BusinessCode string `json:"businessCode"`
	}
	code, raw, err := s.api.Raw(s.ctx, Payment, http.MethodPost, path, nil, refund)
	if err != nil {
		return "", err
	}
	if code != http.StatusBadRequest || json.Unmarshal(raw, &refused) != nil || refused.BusinessCode != "OPERATOR_REQUIRED" {
		return "", fmt.Errorf("an operator refund without X-Operator answered %d %s, want 400 OPERATOR_REQUIRED", code, raw)
	}
	after, err := s.refundStateOf(orderID, sku)
	if err != nil {
		return "", err
	}
	if after.String() != before.String() || after.order.Version != before.order.Version {
		return "", fmt.Errorf("the refused refund changed things: %s -> %s", before, after)
	}

	start := time.Now()
	a, err := s.api.OperatorRefund(s.ctx, orderID, operator, refund)
	if err != nil {
		return "", err
	}
	if a.BusinessCode != suiteapi.Success || a.Status != "REQUESTED" || a.RefundID != refund.RefundID {
		return "", fmt.Errorf("operator refund answered %+v, want SUCCESS REQUESTED %s (the order holds the payment)", a, refund.RefundID)
	}
	if _, err := s.waitOrder(orderID, "PARTIALLY_REFUNDED", 5); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "PARTIALLY_RESTOCKED", 2, 2); err != nil {
		return "", err
	}
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	st, err := s.refundStateOf(orderID, sku)
	if err != nil {
		return "", err
	}
	if len(st.order.Refunds) != 1 {
		return "", fmt.Errorf("%s; want one refund", st)
	}
	r := st.order.Refunds[0]
	if r.RefundID != refund.RefundID || r.RequestedBy != operator || r.Reason != refund.Reason || r.Status != "SUCCEEDED" ||
		st.order.RefundedAmount.String() != "10.00" || st.payment != "PARTIALLY_REFUNDED" || st.refunded != "10.00" ||
		st.stock.Available != refundStock-1 || st.stock.Deducted != 1 {
		return "", fmt.Errorf("refund %+v; %s; want %s SUCCEEDED requested by %s, order and payment PARTIALLY_REFUNDED 10.00, stock %d/1",
			r, st, refund.RefundID, operator, refundStock-1)
	}
	run, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("without X-Operator 400 OPERATOR_REQUIRED, nothing changed; with it REQUESTED, recorded by the order as %s requested by %s (%q): %s; %s",
		r.RefundID, r.RequestedBy, r.Reason, st, run), nil
}

// replayLateRefund: the first refund's OrderRefunded is dead-lettered by
// the notification service while a fault lasts; a second refund is told
// meanwhile; the first, replayed, is older than what notification applied.
// It must still be told (docs/decisions.md, Late facts are told).
func replayLateRefund(s *session) (_ string, err error) {
	orderID, _, err := paidForRefund(s, "")
	if err != nil {
		return "", err
	}
	refund := func(amount string, version int64) error {
		_, err := s.refund(orderID, "PARTIALLY_REFUNDED", version, refundBody{Amount: amount})
		return err
	}

	if err := s.api.FailConsumer(s.ctx, Notification, 0); err != nil {
		return "", err
	}
	// Whatever happens, notification is healthy again when the case ends.
	defer disarm(s, Notification, &err)
	if err := refund("10.00", 5); err != nil {
		return "", fmt.Errorf("first refund: %w", err)
	}
	dl, _, err := s.waitDeadLetter(Notification, orderID)
	if err != nil {
		return "", err
	}
	first, err := s.orderEvent(orderID, "OrderRefunded")
	if err != nil {
		return "", err
	}
	if err := checkMetadata(s, Notification, dl, first.EventID, "RETRYABLE", s.t.RetryMaxAttempts); err != nil {
		return "", err
	}
	disarm(s, Notification, &err)
	if err != nil {
		return "", err
	}

	if err := refund("20.00", 7); err != nil {
		return "", fmt.Errorf("second refund: %w", err)
	}
	// Paid and the second refund told; the first is in the DLQ.
	if _, err := s.waitEffects(orderID, "DEDUCTED", 3, 2); err != nil {
		return "", err
	}

	start := time.Now()
	res, err := s.api.Replay(s.ctx, Notification, dl.ID, requester(s))
	if err != nil {
		return "", err
	}
	if res.Outcome != "APPLIED" || res.EventID != dl.EventID {
		return "", fmt.Errorf("replay of the first refund's %s answered %s for %s, want APPLIED (its refund told late), not IGNORED_STALE",
			dl.EventID, res.Outcome, res.EventID)
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 3, 3); err != nil {
		return "", err
	}
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	var told []string
	for _, n := range eff.Notifications {
		told = append(told, n.Kind)
		if n.EventID == dl.EventID && !strings.Contains(n.Body, "10.00") {
			return "", fmt.Errorf("the late refund was told as %q, want its 10.00", n.Body)
		}
	}
	if !slices.ContainsFunc(eff.Notifications, func(n suiteapi.Notice) bool { return n.EventID == dl.EventID }) {
		return "", fmt.Errorf("notifications %v: none for the replayed %s", told, dl.EventID)
	}
	audit, err := checkAudit(s, Notification, dl, "APPLIED")
	if err != nil {
		return "", err
	}
	run, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("first refund's OrderRefunded dead-lettered by notification after %d attempts; second refund told; replay %d APPLIED for the original %s; notifications %v; audit: %s; %s",
		dl.Attempts, dl.ID, dl.EventID, told, audit, run), nil
}
