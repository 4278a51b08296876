package drill

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// The fail point actions the crash drills use (pkg/failpoint).
const (
	failPointsVar = "FAILPOINTS"
	exitStatus    = 137
)

// crash restarts service with the fail point armed to exit, calls cause
// (which makes the service reach it) and waits for the planned crash. The
// case restarts the service with its usual environment when it ends.
func (s *session) crash(service, failPoint string, cause func()) (restore func()) {
	restore = s.restart(service, map[string]string{failPointsVar: failPoint + "=exit"})
	cause()
	v, err := s.t.Controller.Exit(s.ctx, service, s.t.Timeout)
	checkf(err, "wait for the %s service to exit", service)
	if v.ExitCode == nil {
		fail("the %s service is %s with no exit code, want it exited with the fail point's %d", service, v.State, exitStatus)
	}
	if *v.ExitCode != exitStatus {
		fail("the %s service exited with %d, want the fail point's %d", service, *v.ExitCode, exitStatus)
	}
	return restore
}

// crashRelay places and checks out an order, restarts the order service
// with the relay fail point armed to exit, pays the order and waits for
// the planned crash: the payment service answers once it has recorded the
// payment; its callback reaches the order service, which commits and then
// dies in its relay. The order service then starts again with its relay
// held (the before-publish fail point returns an error), so the drill
// reads the outbox row as the crash left it before anything moves: the
// payment's commit survived the crash, and its OrderPaid is PENDING.
func (s *session) crashRelay(failPoint string, whileDown func(o drillOrder)) (drillOrder, outboxRow) {
	o := s.placedRelayed(2)
	s.crash(Order, failPoint, func() { s.pay(o) })
	whileDown(o)
	checkf(errOf(s.t.Controller.Restart(s.ctx, Order, map[string]string{failPointsVar: outbox.FailPointBeforePublish + "=error"})),
		"restart the order service with its relay held")
	s.orderIs(o.id, "PAID", 3, "after the crash (the commit happened)")
	paid := s.orderEvent(o.id, "OrderPaid")
	if paid.Status != outbox.StatusPending {
		fail("after the crash OrderPaid %s is %s, want PENDING", paid.EventID, paid.Status)
	}
	return o, paid
}

// releaseRelay disarms the held relay once it has held the pending row
// at least once.
func (s *session) releaseRelay() {
	s.waitFired(Order, outbox.FailPointBeforePublish, 1)
	check(s.api.ArmFailPoint(s.ctx, Order, outbox.FailPointBeforePublish, "off", 0))
}

// waitSent waits until the relay has marked the event SENT.
func (s *session) waitSent(eventID string) suiteapi.OutboxStatus {
	var st suiteapi.OutboxStatus
	s.waitUntil(eventID+" marked SENT", func() (_ string, _ bool, err error) {
		st, err = s.api.OutboxStatus(s.ctx, eventID)
		return st.Status, st.Status == outbox.StatusSent, err
	})
	return st
}

// Tutorial window "生产后进程崩溃 — 事务提交但消息未发 — Outbox 中仍有待投递记录".
func lossBeforePublish(s *session) string {
	o, paid := s.crashRelay(outbox.FailPointBeforePublish, func(o drillOrder) {
		// Nothing left the order service: no consumer has seen the payment.
		s.noEffects(o.id, "while the order service was down")
	})
	s.releaseRelay()
	start := time.Now()
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	st := s.waitSent(paid.EventID)
	return fmt.Sprintf("exit %d; nothing consumed while down; after restart PAID v3 with OrderPaid PENDING; released: SENT (attempts %d); %s",
		exitStatus, st.Attempts, s.paidOnce(o, paid.EventID))
}

// Tutorial: "当 Relay 发送后未更新状态就崩溃时，允许重发但业务结果不重复".
func lossAfterPublish(s *session) string {
	o, paid := s.crashRelay(outbox.FailPointAfterPublish, func(o drillOrder) {
		// The event left before the crash, so the consumers apply it meanwhile.
		s.waitEffectsFor(s.t.Timeout, "the copy published before the crash", o.id, "DEDUCTED", 1, 1)
	})
	before := s.counts(handled, consumers...)
	s.releaseRelay()
	start := time.Now()
	s.waitSent(paid.EventID)
	s.waitGrown(handled, before, 1, "the re-sent copy read by each consumer")
	s.converged = time.Since(start)
	return fmt.Sprintf("exit %d; consumers applied the copy sent before the crash; OrderPaid still PENDING; re-sent with the same eventId and read again by each consumer; %s",
		exitStatus, s.paidOnce(o, paid.EventID))
}

// Tutorial window "消费完成前崩溃 — 消息再次投递 — 副作用只发生一次" (crash
// before the consume completes: delivered again, the effect happens once).
func lossConsumerCrash(s *session) string {
	before := s.counts(handled, Inventory)
	o := s.placed("", 2, "40.00", seedStock)
	// The fail point fires after every message: inventory must have read
	// OrderCreated and OrderCheckedOut first (the graceful stop of the
	// restart commits their offsets), so it hits the payment.
	s.waitGrown(handled, before, 2, "inventory reads OrderCreated and OrderCheckedOut")
	restore := s.crash(Inventory, consumer.FailPointAfterCommit, func() { s.pay(o) })
	start := time.Now()
	restore()
	// The restarted process has handled nothing else: a DUPLICATE is the
	// OrderPaid whose offset the crash left uncommitted.
	s.waitGrown(outcomes("DUPLICATE"), map[string]float64{Inventory: 0}, 1, "the OrderPaid delivered again")
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	if applied := s.counts(outcomes("APPLIED"), Inventory)[Inventory]; applied != 0 {
		fail("the restarted inventory applied %v events, want 0 (the deduction committed before the crash)", applied)
	}
	return fmt.Sprintf("exit %d after the commit; restarted: OrderPaid delivered again as a DUPLICATE, 0 applied; %s", exitStatus, s.paidOnce(o, ""))
}

// Tutorial: "当消费者处理失败时，不得提前提交位点" and
// `test_当支付成功事件短暂失败时_业务最终一致`.
func lossConsumerFailure(s *session) string {
	const failures = 2
	o := s.placed("", 2, "40.00", seedStock)
	before := s.counts(retries, Inventory)
	s.arm(Inventory, "inventory.apply", "error", failures)
	start := time.Now()
	s.pay(o)
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	retried := s.grown(retries, before)[Inventory]
	if retried < failures {
		fail("consumer_retries_total of inventory grew by %v, want at least %d", retried, failures)
	}
	check(s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", failures))
	s.noDeadLetters(Inventory, o.id)
	return fmt.Sprintf("inventory failed %d times and was retried (retries +%v), DLQ 0; %s", failures, retried, s.paidOnce(o, ""))
}

// failPointBeforeCommit is the order service's fail point after a state
// change and its outbox row are written, before the commit
// (services/order/internal/adapters).
const failPointBeforeCommit = "order.before-commit"

// Tutorial: "当业务事务回滚时，不得留下可投递的 Outbox 记录" (a rolled-back
// business transaction leaves no deliverable outbox row).
func lossRollback(s *session) string {
	orderID := s.orderID("")
	res := must(s.api.CreateOrder(s.ctx, suiteapi.NewOrder{OrderID: orderID, CustomerID: "C-drill", Currency: "CNY",
		Items: []suiteapi.Item{{SKU: s.sku(""), Quantity: 1, UnitPrice: "40.00"}}}))
	if res.BusinessCode != "SUCCESS" {
		fail("create %s: businessCode %s", orderID, res.BusinessCode)
	}
	s.waitRelayed(orderID, 1)
	s.arm(Order, failPointBeforeCommit, "error", 1)
	checkout := "/orders/" + url.PathEscape(orderID) + "/checkout"
	// One command, sent again after its 500 with the same key, as a
	// client retries: a 5xx is not kept, so the retry runs it.
	keyed := http.Header{suiteapi.IdempotencyKeyHeader: {must(suiteapi.NewIdempotencyKey())}}
	res = commandResult{}
	code := must(s.api.Do(s.ctx, Order, "POST", checkout, keyed, nil, &res, http.StatusInternalServerError))
	if code != http.StatusInternalServerError {
		fail("checkout with %s armed answered %d %s, want 500 (the fail point did not fire?)", failPointBeforeCommit, code, res.BusinessCode)
	}
	check(s.api.FailPointFired(s.ctx, Order, failPointBeforeCommit, 1))
	s.orderIs(orderID, "CREATED", 1, "after the rollback (unchanged)")
	if rows := s.outboxRows(Order, orderID); len(rows) != 1 || rows[0].EventType != "OrderCreated" {
		fail("after the rollback %s has outbox rows %s, want OrderCreated only", orderID, describeRows(rows))
	}

	// Disarmed (it fired once), the same request with the same key goes
	// through.
	start := time.Now()
	res = commandResult{}
	must(s.api.Do(s.ctx, Order, "POST", checkout, keyed, nil, &res))
	if res.BusinessCode != "SUCCESS" || res.Status != "PENDING_PAYMENT" || res.Version != 2 {
		fail("the checkout again: %s %s v%d, want SUCCESS PENDING_PAYMENT v2", res.BusinessCode, res.Status, res.Version)
	}
	s.waitRelayed(orderID, 2)
	s.converged = time.Since(start)
	if rows := s.outboxRows(Order, orderID); len(rows) != 2 || rows[1].EventType != "OrderCheckedOut" {
		fail("after the checkout %s has outbox rows %s, want OrderCreated, OrderCheckedOut", orderID, describeRows(rows))
	}
	return fmt.Sprintf("%s fired: checkout answered %d, order still CREATED v1 with 1 outbox row (OrderCreated); the same checkout: PENDING_PAYMENT v2, exactly 1 OrderCheckedOut row, SENT",
		failPointBeforeCommit, code)
}

// describeRows lists outbox rows as type:status.
func describeRows(rows []outboxRow) string {
	if len(rows) == 0 {
		return "none"
	}
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = r.EventType + ":" + r.Status
	}
	return strings.Join(parts, ", ")
}
