package drill

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Tutorial: "用状态收敛和对账证明最终一致" and the final exercise's
// "定义收敛时限，运行订单、库存、支付、退款对账" — prove the business outcome:
// every service tells the same story, reconciliation finds where they do
// not, compensates through the owning service's API, and audits it.

// runView is a reconciliation run as the API answers it.
type runView suiteapi.Run

func (r runView) String() string {
	var parts []string
	for _, f := range r.Findings {
		outcome, _, _ := strings.Cut(f.Outcome, ":")
		parts = append(parts, fmt.Sprintf("%s %s %s %s", f.Kind, f.Service, f.Action, outcome))
	}
	if len(parts) == 0 {
		parts = []string{"no finding"}
	}
	return fmt.Sprintf("run %d: %s", r.ID, strings.Join(parts, "; "))
}

// reconcile runs reconciliation over orderIDs, whatever their age, checks
// it found exactly the (kind service action) of want, in order, and
// returns the run and how long it took.
func (s *session) reconcile(orderIDs []string, want ...string) (runView, time.Duration) {
	start := time.Now()
	r := runView(must(s.api.Reconcile(s.ctx, "drill "+s.t.RunID+" "+s.slug, orderIDs...)))
	took := time.Since(start)
	if !slices.Equal(suiteapi.Kinds(suiteapi.Run(r)), want) {
		fail("%s; want %v", r, want)
	}
	return r, took
}

// reconcileClean runs reconciliation over orderIDs and fails unless it
// finds nothing: the end of every case whose services must agree.
func (s *session) reconcileClean(orderIDs ...string) runView {
	run, _ := s.reconcile(orderIDs)
	return run
}

// convergedNow asks reconciliation whether every service has reached what
// the order's state requires, and what is still open.
func (s *session) convergedNow(orderID string) (bool, string, error) {
	c, err := s.api.Converged(s.ctx, orderID)
	if err != nil {
		return false, "", err
	}
	var open []string
	for _, m := range c.Mismatches {
		open = append(open, fmt.Sprintf("%s %s (%s)", m.Kind, m.Service, m.Actual))
	}
	return c.Converged, strings.Join(open, "; "), nil
}

// waitConverged waits until reconciliation sees the order converged.
func (s *session) waitConverged(orderID string) {
	s.waitUntil(orderID+" converged", func() (string, bool, error) {
		ok, open, err := s.convergedNow(orderID)
		return "still open: " + open, ok, err
	})
}

func reconcileRules(s *session) string {
	sku := s.sku("")
	refused := []struct {
		what, service, path string
		body                any
	}{
		{"a SKU with a space", Order, "/orders", map[string]any{"customerId": "C-drill", "currency": "CNY",
			"items": []map[string]any{{"sku": "SKU 1", "quantity": 1, "unitPrice": "1.00"}}}},
		{"a price of 0", Order, "/orders", map[string]any{"customerId": "C-drill", "currency": "CNY",
			"items": []map[string]any{{"sku": sku, "quantity": 1, "unitPrice": "0"}}}},
		{"an amount beyond 16 digits", Order, "/orders", map[string]any{"customerId": "C-drill", "currency": "CNY",
			"items": []map[string]any{{"sku": sku, "quantity": 1, "unitPrice": "10000000000000000"}}}},
		{"a payment for order id \"O 1\"", Payment, "/payments", map[string]any{"orderId": "O 1", "amount": "1.00", "currency": "CNY"}},
	}
	for _, r := range refused {
		if code := must(s.api.Do(s.ctx, r.service, "POST", r.path, nil, r.body, nil, 400)); code != 400 {
			fail("%s answered %d, want 400 INVALID_REQUEST", r.what, code)
		}
	}
	// The largest amount there is earns its points, and nothing is
	// dead-lettered on the way.
	o := s.placed("", 1, "9999999999999999.99", 1)
	start := time.Now()
	s.pay(o)
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.waitConverged(o.id)
	s.converged = time.Since(start)
	eff := s.effects(o.id)
	for _, c := range consumers {
		s.noDeadLetters(c, o.id)
	}
	return fmt.Sprintf("%d values refused with 400 where they enter; %s paid: DEDUCTED, %d points, DLQ 0; %s",
		len(refused), o.amount, eff.Ledger[0].Points, s.reconcileClean(o.id))
}

func reconcilePartialRefund(s *session) string {
	o := s.paidOrder("", 2, "10.00", 10)
	var seen []string
	start := time.Now()
	for _, step := range []struct {
		body                        refundBody
		status, inventory, refunded string
		version                     int64
		available, notes, led       int
		points                      int64
	}{
		{refundBody{Amount: "0.01"}, "PARTIALLY_REFUNDED", "DEDUCTED", "0.01", 5, 8, 2, 2, 19},
		{refundBody{Items: []refundLine{{SKU: o.sku, Quantity: 1}}}, "PARTIALLY_REFUNDED", "PARTIALLY_RESTOCKED", "10.01", 7, 9, 3, 3, 9},
	} {
		s.refund(o.id, step.status, step.version, step.body)
		s.waitEffects(o.id, step.inventory, step.led, step.notes)
		s.waitConverged(o.id)
		st := s.refundStateOf(o)
		points := ledgerPoints(st.effects.Ledger)
		if st.order.Status != step.status || st.payment.Status != step.status || st.payment.Refunded != step.refunded ||
			st.stock.Available != step.available || points != step.points {
			fail("after %v: order %s, payment %s refunded %s, stock %d available, %d points; want %s, %s, %s, %d, %d",
				step.body, st.order.Status, st.payment.Status, st.payment.Refunded, st.stock.Available, points,
				step.status, step.status, step.refunded, step.available, step.points)
		}
		seen = append(seen, fmt.Sprintf("order and payment %s %s, inventory %s (%d/10 available), %d points, %d notifications",
			st.payment.Status, st.payment.Refunded, st.effects.Inventory, st.stock.Available, points, len(st.effects.Notifications)))
	}
	s.converged = time.Since(start)
	return strings.Join(seen, "; then ") + "; " + s.reconcileClean(o.id).String()
}

func reconcileLastUnitRace(s *session) string {
	a := s.placed("-a", 1, "50.00", 1)
	b := drillOrder{id: s.orderID("-b"), sku: a.sku, quantity: 1}
	b.amount = s.placeOrder(b.id, b.sku, 1, "50.00")
	ids := []string{a.id, b.id}
	start := time.Now()
	s.pay(a)
	s.pay(b)
	var kept, refunded string
	s.waitUntil("one order kept the unit and the other was cancelled OUT_OF_STOCK", func() (string, bool, error) {
		var seen []string
		kept, refunded = "", ""
		for _, id := range ids {
			o, err := s.api.Order(s.ctx, id)
			if err != nil {
				return "", false, err
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", id, o.Status, o.Reason))
			switch {
			case o.Status == "PAID":
				kept = id
			case o.Status == "CANCELLED" && o.Reason == rules.ReasonOutOfStock:
				refunded = id
			}
		}
		return strings.Join(seen, ", "), kept != "" && refunded != "", nil
	})
	for _, id := range ids {
		s.waitConverged(id)
	}
	s.converged = time.Since(start)
	pay, eff, st := s.payment(refunded), s.effects(refunded), s.stock(a.sku)
	points := ledgerPoints(eff.Ledger)
	told := len(eff.Notifications) > 0 && strings.Contains(eff.Notifications[len(eff.Notifications)-1].Body, "out of stock")
	if pay.Status != "REFUNDED" || pay.Refunded != "50.00" || eff.Inventory != "REJECTED" || points != 0 || !told || st.Available != 0 || st.Deducted != 1 {
		fail("%s: payment %s refunded %s, %s, %d points, told out of stock %v, stock %d/%d; want REFUNDED 50.00, REJECTED, 0, true, 0/1",
			refunded, pay.Status, pay.Refunded, eff, points, told, st.Available, st.Deducted)
	}
	return fmt.Sprintf("%s kept the unit (stock 0/1); %s: inventory REJECTED, payment REFUNDED %s, order CANCELLED %s, %d points, told out of stock; both converged; %s",
		kept, refunded, pay.Refunded, rules.ReasonOutOfStock, points, s.reconcileClean(ids...))
}

// paidThenCancelled pays an order and cancels it before the payment's
// callback reaches it: the race the payment service's check cannot close.
// The payment service's relay holds the callbacks (they wait in its
// outbox) until the returned function lets them go, or the case ends.
func (s *session) paidThenCancelled() (orderID string, release func()) {
	orderID = s.orderID("")
	o := drillOrder{id: orderID, amount: s.placeOrder(orderID, s.sku(""), 1, "10.00")}
	release = s.arm(Payment, outbox.FailPointBeforePublish, "error", 1_000_000)
	s.pay(o)
	var res commandResult
	check(s.api.Call(s.ctx, Order, "POST", "/orders/"+url.PathEscape(orderID)+"/cancel", nil, &res))
	if res.Status != "CANCELLED" {
		fail("cancel %s: %s %s", orderID, res.BusinessCode, res.Status)
	}
	// The payment's callback is in the payment outbox: the held relay
	// meets it.
	s.waitFired(Payment, outbox.FailPointBeforePublish, 1)
	return orderID, release
}

// returned lets the held callbacks go (release) and waits until the order,
// the payment and the notification service agree that a cancelled order's
// payment went back: the case's convergence.
func (s *session) returned(orderID string, release func()) string {
	start := time.Now()
	release()
	o := s.waitOrder(orderID, "CANCELLED", 5) // OrderPaymentReturned
	s.waitEffects(orderID, "NONE", 0, 1)
	s.waitConverged(orderID)
	s.converged = time.Since(start)
	pay, eff := s.payment(orderID), s.effects(orderID)
	if o.Status != "CANCELLED" || pay.Status != "REFUNDED" || pay.Refunded != "10.00" || eff.Notifications[0].Kind != "PAYMENT_RETURNED" {
		fail("order %s, payment %s refunded %s, notification %s; want CANCELLED, REFUNDED 10.00, PAYMENT_RETURNED",
			o.Status, pay.Status, pay.Refunded, eff.Notifications[0].Kind)
	}
	var types []string
	for _, e := range must(s.api.OrderEvents(s.ctx, orderID))[2:] {
		types = append(types, e.EventType)
	}
	return fmt.Sprintf("order CANCELLED v%d (%s), payment REFUNDED %s, customer told PAYMENT_RETURNED", o.Version,
		strings.Join(types, ", "), pay.Refunded)
}

func reconcilePaymentReturned(s *session) string {
	orderID, release := s.paidThenCancelled()
	return s.returned(orderID, release) + "; " + s.reconcileClean(orderID).String()
}

func reconcilePaymentForUnpayable(s *session) string {
	orderID, release := s.paidThenCancelled()
	// The callbacks stay held: the order does not know of the payment.
	run, took := s.reconcile([]string{orderID}, "PAYMENT_FOR_UNPAYABLE_ORDER payment REFUND")
	if pay := s.payment(orderID); pay.Status != "REFUNDED" || pay.Refunded != "10.00" {
		fail("after the run the payment is %s, refunded %s; want REFUNDED 10.00", pay.Status, pay.Refunded)
	}
	seen := s.returned(orderID, release)
	return fmt.Sprintf("%s in %s: %s; callbacks let go: %s (one refund, the order's return id); %s",
		run, took.Round(time.Millisecond), strings.TrimPrefix(run.Findings[0].Outcome, "DONE: "), seen, s.reconcileClean(orderID))
}

func reconcileLostEffect(s *session) string {
	o := s.paidOrder("", 2, "10.00", 10)
	s.waitRelayed(o.id, 3)
	var ids []string
	for _, e := range must(s.api.OrderEvents(s.ctx, o.id)) {
		ids = append(ids, e.EventID)
	}
	check(RestoreBackup(s.ctx, s.database(Inventory), Inventory, o.id, ids))
	ok, open, err := s.convergedNow(o.id)
	checkf(err, "after the restore")
	if ok {
		fail("after the restore reconciliation sees the order converged (%s)", open)
	}
	// Hold the order service's relay, so the second run sees the same
	// facts as the first.
	release := s.arm(Order, outbox.FailPointBeforePublish, "error", 1_000_000)
	first, took := s.reconcile([]string{o.id}, "MISSING_EFFECT inventory REPUBLISH")
	// The republished events are due again: the held relay meets them.
	s.waitFired(Order, outbox.FailPointBeforePublish, 1)
	second, _ := s.reconcile([]string{o.id}, "MISSING_EFFECT inventory REPUBLISH")
	release()
	if second.Actions != 0 || !strings.HasPrefix(second.Findings[0].Outcome, "ALREADY_TAKEN") {
		fail("the second run over the same facts: %d actions, %s; want none, ALREADY_TAKEN", second.Actions, second.Findings[0].Outcome)
	}
	start := time.Now()
	s.waitConverged(o.id)
	s.converged = time.Since(start)
	s.stockIs(o.sku, 8, 2, "after the republish (deducted once again)")
	s.processedOnce(ids[2])
	return fmt.Sprintf("%s in %s (%d events due again); second %s, 0 actions; stock 8/2 again, one dedup row per consumer; %s",
		first, took.Round(time.Millisecond), len(ids), second, s.reconcileClean(o.id))
}

func reconcileStuckInDLQ(s *session) string {
	// Inventory fails every attempt of the payment, then recovers: the
	// cause is gone, the event is in the dead letters.
	o, dl := s.deadLetteredPayment()
	run, took := s.reconcile([]string{o.id}, "STUCK_IN_DLQ inventory REPLAY")
	start := time.Now()
	s.waitConverged(o.id)
	s.converged = time.Since(start)
	_, audit := must2(s.api.Inspect(s.ctx, Inventory, dl.ID))
	if len(audit) != 1 || !strings.HasPrefix(audit[0].RequestedBy, "reconciliation run") {
		fail("replays of dead letter %d: %+v, want one requested by the reconciliation run", dl.ID, audit)
	}
	return fmt.Sprintf("dead letter %d (%s, %s); %s in %s; replay audited as requested by %q (%s); %s",
		dl.ID, dl.ErrorClass, dl.FailureReason, run, took.Round(time.Millisecond), audit[0].RequestedBy, audit[0].Outcome, s.reconcileClean(o.id))
}
