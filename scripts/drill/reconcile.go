package drill

import (
	"errors"
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

func reconcileCases() []Case {
	return []Case{
		newCase("reconcile", "one-set-of-rules",
			"what the order service accepts, every service applies: values no consumer could apply are refused with 400 where they enter; an order on the rules' limits converges", false, reconcileRules),
		newCase("reconcile", "partial-refund",
			"0.01 back of a 2-unit 20.00 order: order and payment PARTIALLY_REFUNDED 0.01, nothing restocked, 19 points, 2 notifications; then a unit back; reconciliation agrees", false, reconcilePartialRefund),
		newCase("reconcile", "operator-refund",
			"an operator's refund through the payment service's operator route with X-Operator: the order records it with who asked, payment, stock, points and the customer's message follow, a run finds nothing; without X-Operator 400 OPERATOR_REQUIRED and nothing changes", false, reconcileOperatorRefund),
		newCase("reconcile", "last-unit-race",
			"two customers race for the last unit and both pay: one keeps it; the other's money comes back in full on the normal path (CANCELLED OUT_OF_STOCK, points net zero, told why), with no person; a run finds nothing", false, reconcileLastUnitRace),
		newCase("reconcile", "payment-returned",
			"a payment that reaches an order cancelled after the payment's check is returned on the normal path: OrderPaymentRejected, the payment service's refund, OrderPaymentReturned, the customer told", false, reconcilePaymentReturned),
		newCase("reconcile", "payment-for-unpayable-order",
			"paid, cancelled, callback held: a run finds PAYMENT_FOR_UNPAYABLE_ORDER and refunds through the payment service; once the callbacks flow every service agrees and a second run finds nothing", false, reconcilePaymentForUnpayable),
		newCase("reconcile", "lost-effect",
			"inventory restored from a backup older than the payment: a run finds MISSING_EFFECT, republishes the order's events under their eventIds, a second run takes no second action, inventory converges", false, reconcileLostEffect),
		newCase("reconcile", "restore-from-backup",
			"the order database backed up with pg_dump once an order is paid, the order refunded and a second order paid, the database restored with pg_restore: the run before traffic fences the refunded order at the highest version its consumers applied and names only the second order (ORPHAN_EFFECT) for a person; the fenced order's next refund reaches every consumer, and what the lost refund leaves is named for a person", true, reconcileRestoreFromBackup),
		newCase("reconcile", "stuck-in-dlq",
			"an OrderPaid dead-lettered while the consumer failed, its cause gone: a run finds STUCK_IN_DLQ and replays it once, audited, and the order converges", false, reconcileStuckInDLQ),
	}
}

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

// reconcile runs reconciliation over orderIDs, whatever their age, and
// returns the run and how long it took.
func (s *session) reconcile(orderIDs ...string) (runView, time.Duration, error) {
	start := time.Now()
	r, err := s.api.Reconcile(s.ctx, "drill "+s.t.RunID+" "+s.slug, orderIDs...)
	return runView(r), time.Since(start), err
}

// reconcileClean runs reconciliation over orderIDs and fails unless it
// finds nothing: the end of every case whose services must agree.
func (s *session) reconcileClean(orderIDs ...string) (runView, error) {
	run, _, err := s.reconcile(orderIDs...)
	if err != nil {
		return run, err
	}
	return run, expectFindings(run)
}

// converged asks reconciliation whether every service has reached what the
// order's state requires.
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
func (s *session) waitConverged(orderID string) (time.Duration, error) {
	var open string
	took, err := s.waitUntil(orderID+" converged", func() (bool, error) {
		ok, o, err := s.convergedNow(orderID)
		open = o
		return ok, err
	})
	if err != nil {
		return took, fmt.Errorf("%w; still open: %s", err, open)
	}
	return took, nil
}

// expectFindings checks a run found exactly the (kind service action) of
// want, in order.
func expectFindings(r runView, want ...string) error {
	var got []string
	for _, f := range r.Findings {
		got = append(got, f.Kind+" "+f.Service+" "+f.Action)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s; want %v", r, want)
	}
	return nil
}

// payment reads the payment of an order.
func (s *session) payment(orderID string) (status, refunded string, err error) {
	var p struct {
		Status   string `json:"status"`
		Refunded string `json:"refunded"`
	}
	err = s.api.Call(s.ctx, Payment, "GET", "/payments/orders/"+url.PathEscape(orderID), nil, &p)
	return p.Status, p.Refunded, err
}

func reconcileRules(s *session) (string, error) {
	orderID, sku := s.orderID(""), s.sku("")
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
		var e struct {
			BusinessCode string `json:"businessCode"`
		}
		code, err := s.api.Do(s.ctx, r.service, "POST", r.path, nil, r.body, &e, 400)
		if err != nil {
			return "", err
		}
		if code != 400 {
			return "", fmt.Errorf("%s answered %d, want 400 INVALID_REQUEST", r.what, code)
		}
	}
	// The largest amount there is earns its points, and nothing is
	// dead-lettered on the way.
	if err := s.api.SetStock(s.ctx, sku, 1); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, 1, "9999999999999999.99")
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
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
	for _, c := range consumers {
		if err := s.noDeadLetters(c, orderID); err != nil {
			return "", err
		}
	}
	run, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d values refused with 400 where they enter; %s paid: DEDUCTED, %d points, DLQ 0; %s",
		len(refused), amount, eff.Ledger[0].Points, run), nil
}

func reconcilePartialRefund(s *session) (string, error) {
	orderID, sku, _, err := s.paidOrder("", 2, "10.00", 10)
	if err != nil {
		return "", err
	}
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
		{refundBody{Items: []refundLine{{SKU: sku, Quantity: 1}}}, "PARTIALLY_REFUNDED", "PARTIALLY_RESTOCKED", "10.01", 7, 9, 3, 3, 9},
	} {
		if _, err := s.refund(orderID, step.status, step.version, step.body); err != nil {
			return "", err
		}
		if _, err := s.waitEffects(orderID, step.inventory, step.led, step.notes); err != nil {
			return "", err
		}
		if _, err := s.waitConverged(orderID); err != nil {
			return "", err
		}
		o, err := s.api.Order(s.ctx, orderID)
		if err != nil {
			return "", err
		}
		status, refunded, err := s.payment(orderID)
		if err != nil {
			return "", err
		}
		st, err := s.api.Stock(s.ctx, sku)
		if err != nil {
			return "", err
		}
		eff, err := s.effects(orderID)
		if err != nil {
			return "", err
		}
		points := ledgerPoints(eff.Ledger)
		if o.Status != step.status || status != step.status || refunded != step.refunded || st.Available != step.available || points != step.points {
			return "", fmt.Errorf("after %v: order %s, payment %s refunded %s, stock %d available, %d points; want %s, %s, %s, %d, %d",
				step.body, o.Status, status, refunded, st.Available, points, step.status, step.status, step.refunded, step.available, step.points)
		}
		seen = append(seen, fmt.Sprintf("order and payment %s %s, inventory %s (%d/10 available), %d points, %d notifications",
			status, refunded, eff.Inventory, st.Available, points, len(eff.Notifications)))
	}
	s.converged = time.Since(start)
	run, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return strings.Join(seen, "; then ") + "; " + run.String(), nil
}

func reconcileLastUnitRace(s *session) (string, error) {
	sku := s.sku("")
	ids := []string{s.orderID("-a"), s.orderID("-b")}
	if err := s.api.SetStock(s.ctx, sku, 1); err != nil {
		return "", err
	}
	amounts := make([]string, len(ids))
	for i, id := range ids {
		amount, err := s.placeOrder(id, sku, 1, "50.00")
		if err != nil {
			return "", err
		}
		amounts[i] = amount
	}
	start := time.Now()
	for i, id := range ids {
		if err := s.pay(id, amounts[i]); err != nil {
			return "", err
		}
	}
	var kept, refunded string
	var seen []string
	if _, err := s.waitUntil("one order kept the unit and the other was cancelled OUT_OF_STOCK", func() (bool, error) {
		seen = seen[:0]
		kept, refunded = "", ""
		for _, id := range ids {
			o, err := s.api.Order(s.ctx, id)
			if err != nil {
				return false, err
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", id, o.Status, o.Reason))
			switch {
			case o.Status == "PAID":
				kept = id
			case o.Status == "CANCELLED" && o.Reason == rules.ReasonOutOfStock:
				refunded = id
			}
		}
		return kept != "" && refunded != "", nil
	}); err != nil {
		return "", fmt.Errorf("%w; %s", err, strings.Join(seen, ", "))
	}
	for _, id := range ids {
		if _, err := s.waitConverged(id); err != nil {
			return "", err
		}
	}
	s.converged = time.Since(start)
	status, back, err := s.payment(refunded)
	if err != nil {
		return "", err
	}
	eff, err := s.effects(refunded)
	if err != nil {
		return "", err
	}
	points := ledgerPoints(eff.Ledger)
	told := len(eff.Notifications) > 0 && strings.Contains(eff.Notifications[len(eff.Notifications)-1].Body, "out of stock")
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if status != "REFUNDED" || back != "50.00" || eff.Inventory != "REJECTED" || points != 0 || !told || st.Available != 0 || st.Deducted != 1 {
		return "", fmt.Errorf("%s: payment %s refunded %s, %s, %d points, told out of stock %v, stock %d/%d; want REFUNDED 50.00, REJECTED, 0, true, 0/1",
			refunded, status, back, eff, points, told, st.Available, st.Deducted)
	}
	run, err := s.reconcileClean(ids...)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s kept the unit (stock 0/1); %s: inventory REJECTED, payment REFUNDED %s, order CANCELLED %s, %d points, told out of stock; both converged; %s",
		kept, refunded, back, rules.ReasonOutOfStock, points, run), nil
}

// holdCallbacks stops the payment service's relay from delivering
// callbacks (they wait in its outbox), or lets them go again.
func (s *session) holdCallbacks(hold bool) error {
	if hold {
		return s.api.ArmFailPoint(s.ctx, Payment, outbox.FailPointBeforePublish, "error", 1_000_000)
	}
	return s.api.ArmFailPoint(s.ctx, Payment, outbox.FailPointBeforePublish, "off", 0)
}

// paidThenCancelled pays an order and cancels it before the payment's
// callback reaches it: the race the payment service's check cannot close.
func (s *session) paidThenCancelled(orderID string) error {
	amount, err := s.placeOrder(orderID, s.sku(""), 1, "10.00")
	if err != nil {
		return err
	}
	if err := s.holdCallbacks(true); err != nil {
		return err
	}
	if err := s.pay(orderID, amount); err != nil {
		return err
	}
	var res commandResult
	if err := s.api.Call(s.ctx, Order, "POST", "/orders/"+url.PathEscape(orderID)+"/cancel", nil, &res); err != nil {
		return err
	}
	if res.Status != "CANCELLED" {
		return fmt.Errorf("cancel %s: %s %s", orderID, res.BusinessCode, res.Status)
	}
	// The payment's callback is in the payment outbox: the held relay
	// meets it.
	return s.waitFired(Payment, outbox.FailPointBeforePublish, 1)
}

// returned waits until the order, the payment and the notification service
// agree that a cancelled order's payment went back.
func (s *session) returned(orderID string) (string, error) {
	var o orderView
	if _, err := s.waitUntil(orderID+": OrderPaymentReturned", func() (bool, error) {
		var err error
		o, err = s.api.Order(s.ctx, orderID)
		return o.Version == 5, err
	}); err != nil {
		return "", fmt.Errorf("%w; order %s v%d", err, o.Status, o.Version)
	}
	if _, err := s.waitEffects(orderID, "NONE", 0, 1); err != nil {
		return "", err
	}
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	status, refunded, err := s.payment(orderID)
	if err != nil {
		return "", err
	}
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if o.Status != "CANCELLED" || status != "REFUNDED" || refunded != "10.00" || eff.Notifications[0].Kind != "PAYMENT_RETURNED" {
		return "", fmt.Errorf("order %s, payment %s refunded %s, notification %s; want CANCELLED, REFUNDED 10.00, PAYMENT_RETURNED",
			o.Status, status, refunded, eff.Notifications[0].Kind)
	}
	events, err := s.api.OrderEvents(s.ctx, orderID)
	if err != nil {
		return "", err
	}
	var types []string
	for _, e := range events[2:] {
		types = append(types, e.EventType)
	}
	return fmt.Sprintf("order CANCELLED v%d (%s), payment REFUNDED %s, customer told PAYMENT_RETURNED", o.Version,
		strings.Join(types, ", "), refunded), nil
}

func reconcilePaymentReturned(s *session) (string, error) {
	orderID := s.orderID("")
	if err := s.paidThenCancelled(orderID); err != nil {
		return "", errors.Join(err, s.holdCallbacks(false))
	}
	start := time.Now()
	if err := s.holdCallbacks(false); err != nil {
		return "", err
	}
	seen, err := s.returned(orderID)
	if err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	run, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return seen + "; " + run.String(), nil
}

func reconcilePaymentForUnpayable(s *session) (string, error) {
	orderID := s.orderID("")
	if err := s.paidThenCancelled(orderID); err != nil {
		return "", errors.Join(err, s.holdCallbacks(false))
	}
	// The callbacks stay held: the order does not know of the payment.
	run, took, err := s.reconcile(orderID)
	if err != nil {
		return "", errors.Join(err, s.holdCallbacks(false))
	}
	if err := expectFindings(run, "PAYMENT_FOR_UNPAYABLE_ORDER payment REFUND"); err != nil {
		return "", errors.Join(err, s.holdCallbacks(false))
	}
	status, refunded, err := s.payment(orderID)
	if err != nil {
		return "", errors.Join(err, s.holdCallbacks(false))
	}
	if status != "REFUNDED" || refunded != "10.00" {
		return "", errors.Join(fmt.Errorf("after the run the payment is %s, refunded %s; want REFUNDED 10.00", status, refunded), s.holdCallbacks(false))
	}
	start := time.Now()
	if err := s.holdCallbacks(false); err != nil {
		return "", err
	}
	seen, err := s.returned(orderID)
	if err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	second, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s in %s: %s; callbacks let go: %s (one refund, the order's return id); %s",
		run, took.Round(time.Millisecond), strings.TrimPrefix(run.Findings[0].Outcome, "DONE: "), seen, second), nil
}

func reconcileLostEffect(s *session) (string, error) {
	orderID, sku, _, err := s.paidOrder("", 2, "10.00", 10)
	if err != nil {
		return "", err
	}
	if err := s.waitRelayed(orderID, 3); err != nil {
		return "", err
	}
	events, err := s.api.OrderEvents(s.ctx, orderID)
	if err != nil {
		return "", err
	}
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.EventID
	}
	if err := s.restoreBackup(Inventory, orderID, ids); err != nil {
		return "", err
	}
	ok, open, err := s.convergedNow(orderID)
	if err != nil {
		return "", fmt.Errorf("after the restore: %w", err)
	}
	if ok {
		return "", fmt.Errorf("after the restore reconciliation sees the order converged (%s)", open)
	}
	// Hold the order service's relay, so the second run sees the same
	// facts as the first.
	if err := s.api.ArmFailPoint(s.ctx, Order, outbox.FailPointBeforePublish, "error", 1_000_000); err != nil {
		return "", err
	}
	release := func() error { return s.api.ArmFailPoint(s.ctx, Order, outbox.FailPointBeforePublish, "off", 0) }
	first, took, err := s.reconcile(orderID)
	if err != nil {
		return "", errors.Join(err, release())
	}
	if err := expectFindings(first, "MISSING_EFFECT inventory REPUBLISH"); err != nil {
		return "", errors.Join(err, release())
	}
	// The republished events are due again: the held relay meets them.
	if err := s.waitFired(Order, outbox.FailPointBeforePublish, 1); err != nil {
		return "", errors.Join(err, release())
	}
	second, _, err := s.reconcile(orderID)
	if err != nil {
		return "", errors.Join(err, release())
	}
	if err := errors.Join(expectFindings(second, "MISSING_EFFECT inventory REPUBLISH"), release()); err != nil {
		return "", err
	}
	if second.Actions != 0 || !strings.HasPrefix(second.Findings[0].Outcome, "ALREADY_TAKEN") {
		return "", fmt.Errorf("the second run over the same facts: %d actions, %s; want none, ALREADY_TAKEN", second.Actions, second.Findings[0].Outcome)
	}
	start := time.Now()
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if st.Available != 8 || st.Deducted != 2 {
		return "", fmt.Errorf("stock %d/%d after the republish, want 8/2 (deducted once again)", st.Available, st.Deducted)
	}
	if err := s.processedOnce(ids[2]); err != nil {
		return "", err
	}
	third, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s in %s (%d events due again); second %s, 0 actions; stock 8/2 again, one dedup row per consumer; %s",
		first, took.Round(time.Millisecond), len(ids), second, third), nil
}

func reconcileStuckInDLQ(s *session) (string, error) {
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, 10); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, 1, "10.00")
	if err != nil {
		return "", err
	}
	// Inventory fails every attempt of the payment, then recovers: the
	// cause is gone, the event is in the dead letters.
	if err := s.api.ArmFailPoint(s.ctx, Inventory, "inventory.apply", "error", s.t.RetryMaxAttempts); err != nil {
		return "", err
	}
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	dl, _, err := s.waitDeadLetter(Inventory, orderID)
	if err != nil {
		return "", err
	}
	if err := s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", s.t.RetryMaxAttempts); err != nil {
		return "", err
	}
	run, took, err := s.reconcile(orderID)
	if err != nil {
		return "", err
	}
	if err := expectFindings(run, "STUCK_IN_DLQ inventory REPLAY"); err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	_, audit, err := s.api.Inspect(s.ctx, Inventory, dl.ID)
	if err != nil {
		return "", err
	}
	if len(audit) != 1 || !strings.HasPrefix(audit[0].RequestedBy, "reconciliation run") {
		return "", fmt.Errorf("replays of dead letter %d: %+v, want one requested by the reconciliation run", dl.ID, audit)
	}
	second, err := s.reconcileClean(orderID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("dead letter %d (%s, %s); %s in %s; replay audited as requested by %q (%s); %s",
		dl.ID, dl.ErrorClass, dl.FailureReason, run, took.Round(time.Millisecond), audit[0].RequestedBy, audit[0].Outcome, second), nil
}
