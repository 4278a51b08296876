package drill

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Tutorial: "在每个确认窗口测试消息丢失" (test message loss at every
// acknowledgement window). The relay's two crash windows are driven with
// fail points through the Controller; the consumer window and the
// rolled-back transaction with run-time fail points; the broker windows (a
// lost acknowledgement, an outage) and the callback sink's outage through
// the Controller's optional BrokerController and ServiceStopper
// (outage.go). The outages come last: they take the longest.
func lossCases() []Case {
	return []Case{
		newCase("loss", "before-publish",
			"order service killed after the commit, before the publish: OrderPaid stays PENDING, delivered after the restart, applied once",
			true, lossBeforePublish),
		newCase("loss", "after-publish",
			"order service killed after the publish, before marking SENT: the same eventId is sent again, applied once",
			true, lossAfterPublish),
		newCase("loss", "lost-ack",
			"the broker appends OrderPaid but the relay never sees the ack: the same eventId is sent again, applied once",
			true, lossLostAck),
		newCase("loss", "consumer-crash",
			"inventory killed after its commit, before the ack: the OrderPaid is delivered again, seen as a duplicate, effects once",
			true, lossConsumerCrash),
		newCase("loss", "consumer-failure",
			"inventory fails twice: not acknowledged, retried, applied once, nothing dead-lettered",
			false, lossConsumerFailure),
		newCase("loss", "rollback",
			"the checkout's transaction rolls back after its outbox insert: no outbox row, status unchanged; the same checkout then writes exactly one",
			false, lossRollback),
		newCase("loss", "broker-outage",
			"the broker is away: OrderPaid stays PENDING, attempts grow, next_attempt_at backs off with jitter; drained at the next attempt after the return, applied once",
			true, lossBrokerOutage),
		newCase("loss", "callback-outage",
			"the order service is away: the payment callback stays PENDING, attempts grow, next_attempt_at backs off with jitter; delivered once it is back, applied once",
			true, lossCallbackOutage),
	}
}

// The fail point actions the crash drills use (pkg/failpoint).
const (
	failPointsVar = "FAILPOINTS"
	exitStatus    = 137
)

// crashOrderService places and checks out an order, restarts the order
// service with the relay fail point armed to exit, pays the order and waits
// for the planned crash. It returns the order, its SKU and amount.
func crashOrderService(s *session, failPoint string, quantity int) (orderID, sku string, err error) {
	orderID, sku = s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", "", err
	}
	// OrderCreated and OrderCheckedOut leave first, so the fail point hits
	// the payment's event and nothing earlier.
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", "", err
	}
	if err := s.t.Controller.Restart(s.ctx, Order, map[string]string{failPointsVar: failPoint + "=exit"}); err != nil {
		return "", "", fmt.Errorf("restart the order service with %s=exit: %w", failPoint, err)
	}
	// The payment service answers once it has recorded the payment; its
	// callback reaches the order service, which commits and then dies in
	// its relay.
	if err := s.pay(orderID, amount); err != nil {
		return "", "", err
	}
	code, err := s.t.Controller.WaitExit(s.ctx, Order)
	if err != nil {
		return "", "", fmt.Errorf("wait for the order service to exit: %w", err)
	}
	if code != exitStatus {
		return "", "", fmt.Errorf("the order service exited with %d, want the fail point's %d", code, exitStatus)
	}
	return orderID, sku, nil
}

// holdRelay starts the order service again with its relay held (the
// before-publish fail point returns an error), so the drill can read the
// outbox row as the crash left it before anything moves.
func holdRelay(s *session) error {
	err := s.t.Controller.Restart(s.ctx, Order, map[string]string{failPointsVar: outbox.FailPointBeforePublish + "=error"})
	if err != nil {
		return fmt.Errorf("restart the order service with its relay held: %w", err)
	}
	return nil
}

// releaseRelay disarms the held relay once it has held the pending row
// at least once.
func releaseRelay(s *session) error {
	if err := s.waitFired(Order, outbox.FailPointBeforePublish, 1); err != nil {
		return fmt.Errorf("the held relay: %w", err)
	}
	return s.api.ArmFailPoint(s.ctx, Order, outbox.FailPointBeforePublish, "off", 0)
}

// restoreOrderService restarts the order service with its usual
// environment, whatever the case did to it.
func restoreOrderService(s *session, err *error) {
	if rerr := s.t.Controller.Restart(s.ctx, Order, nil); rerr != nil {
		*err = errors.Join(*err, fmt.Errorf("restore the order service: %w", rerr))
	}
}

// pendingPaid reads the order after the restart: the payment's commit
// survived the crash, and its OrderPaid row is still PENDING.
func pendingPaid(s *session, orderID string) (orderEvent, error) {
	o, err := s.api.Order(s.ctx, orderID)
	if err != nil {
		return orderEvent{}, err
	}
	if o.Status != "PAID" || o.Version != 3 {
		return orderEvent{}, fmt.Errorf("after the crash the order is %s v%d, want PAID v3 (the commit happened)", o.Status, o.Version)
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return orderEvent{}, err
	}
	st, err := s.api.OutboxStatus(s.ctx, paid.EventID)
	if err != nil {
		return orderEvent{}, err
	}
	if st.Status != outbox.StatusPending {
		return orderEvent{}, fmt.Errorf("after the crash OrderPaid %s is %s, want PENDING", paid.EventID, st.Status)
	}
	return paid, nil
}

// waitSent waits until the relay has marked the event SENT.
func waitSent(s *session, eventID string) (outboxStatus, error) {
	var st outboxStatus
	_, err := s.waitUntil(eventID+" marked SENT", func() (bool, error) {
		var err error
		st, err = s.api.OutboxStatus(s.ctx, eventID)
		return st.Status == outbox.StatusSent, err
	})
	return st, err
}

// Tutorial window "生产后进程崩溃 — 事务提交但消息未发 — Outbox 中仍有待投递记录".
func lossBeforePublish(s *session) (seen string, err error) {
	defer restoreOrderService(s, &err)
	const quantity = 2
	orderID, sku, err := crashOrderService(s, outbox.FailPointBeforePublish, quantity)
	if err != nil {
		return "", err
	}
	// Nothing left the order service: no consumer has seen the payment.
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if eff.Inventory != "NONE" || len(eff.Ledger) != 0 || len(eff.Notifications) != 0 {
		return "", fmt.Errorf("while the order service was down: %s, want NONE, 0, 0 (nothing published)", eff)
	}
	if err := holdRelay(s); err != nil {
		return "", err
	}
	paid, err := pendingPaid(s, orderID)
	if err != nil {
		return "", err
	}
	if err := releaseRelay(s); err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	st, err := waitSent(s, paid.EventID)
	if err != nil {
		return "", err
	}
	effectsOnce, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("exit %d; nothing consumed while down; after restart PAID v3 with OrderPaid PENDING; released: SENT (attempts %d); %s",
		exitStatus, st.Attempts, effectsOnce), nil
}

// Tutorial: "当 Relay 发送后未更新状态就崩溃时，允许重发但业务结果不重复".
func lossAfterPublish(s *session) (seen string, err error) {
	defer restoreOrderService(s, &err)
	const quantity = 2
	orderID, sku, err := crashOrderService(s, outbox.FailPointAfterPublish, quantity)
	if err != nil {
		return "", err
	}
	// The event left before the crash, so the consumers apply it meanwhile.
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", fmt.Errorf("the copy published before the crash: %w", err)
	}
	if err := holdRelay(s); err != nil {
		return "", err
	}
	paid, err := pendingPaid(s, orderID)
	if err != nil {
		return "", err
	}
	before, err := s.handledNow()
	if err != nil {
		return "", err
	}
	if err := releaseRelay(s); err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := waitSent(s, paid.EventID); err != nil {
		return "", err
	}
	if _, err := s.waitHandled(before, 1); err != nil {
		return "", fmt.Errorf("the re-sent copy: %w", err)
	}
	s.converged = time.Since(start)
	effectsOnce, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("exit %d; consumers applied the copy sent before the crash; OrderPaid still PENDING; re-sent with the same eventId and read again by each consumer; %s",
		exitStatus, effectsOnce), nil
}

// consumerAfterCommit is the consumer kit's fail point between a
// consumer's commit and its acknowledgement.
const consumerAfterCommit = consumer.FailPointAfterCommit

// outcomes reads the inventory consumer's consumer_event_outcomes_total of
// one inbox outcome (APPLIED, DUPLICATE, ...).
func (s *session) outcomes(service, outcome string) (float64, error) {
	return s.api.Metric(s.ctx, service, "consumer_event_outcomes_total", map[string]string{"outcome": outcome})
}

// Tutorial window "消费完成前崩溃 — 消息再次投递 — 副作用只发生一次" (crash
// before the consume completes: delivered again, the effect happens once).
func lossConsumerCrash(s *session) (seen string, err error) {
	const quantity = 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	before, err := s.handled(Inventory)
	if err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", err
	}
	// The fail point fires after every message: inventory must have read
	// OrderCreated and OrderCheckedOut first (the graceful stop of the
	// restart commits their offsets), so it hits the payment.
	if _, err := s.waitUntil("inventory reads OrderCreated and OrderCheckedOut", func() (bool, error) {
		n, err := s.handled(Inventory)
		return n >= before+2, err
	}); err != nil {
		return "", err
	}
	restored := false
	defer func() {
		if restored {
			return
		}
		if rerr := s.t.Controller.Restart(s.ctx, Inventory, nil); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore the inventory service: %w", rerr))
		}
	}()
	if err := s.t.Controller.Restart(s.ctx, Inventory, map[string]string{failPointsVar: consumerAfterCommit + "=exit"}); err != nil {
		return "", fmt.Errorf("restart inventory with %s=exit: %w", consumerAfterCommit, err)
	}
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	code, err := s.t.Controller.WaitExit(s.ctx, Inventory)
	if err != nil {
		return "", fmt.Errorf("wait for inventory to exit: %w", err)
	}
	if code != exitStatus {
		return "", fmt.Errorf("inventory exited with %d, want the fail point's %d", code, exitStatus)
	}
	start := time.Now()
	restored = true
	if err := s.t.Controller.Restart(s.ctx, Inventory, nil); err != nil {
		return "", fmt.Errorf("restart inventory: %w", err)
	}
	// The restarted process has handled nothing else: a DUPLICATE is the
	// OrderPaid whose offset the crash left uncommitted.
	if _, err := s.waitUntil("the OrderPaid delivered again", func() (bool, error) {
		n, err := s.outcomes(Inventory, "DUPLICATE")
		return n >= 1, err
	}); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	applied, err := s.outcomes(Inventory, "APPLIED")
	if err != nil {
		return "", err
	}
	if applied != 0 {
		return "", fmt.Errorf("the restarted inventory applied %v events, want 0 (the deduction committed before the crash)", applied)
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", err
	}
	effectsOnce, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("exit %d after the commit; restarted: OrderPaid delivered again as a DUPLICATE, 0 applied; %s", exitStatus, effectsOnce), nil
}

// Tutorial: "当消费者处理失败时，不得提前提交位点" and
// `test_当支付成功事件短暂失败时_业务最终一致`.
func lossConsumerFailure(s *session) (seen string, err error) {
	const quantity, failures = 2, 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", err
	}
	retries := func() (float64, error) { return s.api.Metric(s.ctx, Inventory, "consumer_retries_total", nil) }
	retriesBefore, err := retries()
	if err != nil {
		return "", err
	}
	if err := s.api.ArmFailPoint(s.ctx, Inventory, "inventory.apply", "error", failures); err != nil {
		return "", err
	}
	defer disarm(s, Inventory, &err)
	start := time.Now()
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	retriesAfter, err := retries()
	if err != nil {
		return "", err
	}
	if got := retriesAfter - retriesBefore; got < failures {
		return "", fmt.Errorf("consumer_retries_total of inventory grew by %v, want at least %d", got, failures)
	}
	if err := s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", failures); err != nil {
		return "", err
	}
	dl, err := s.api.DeadLetters(s.ctx, Inventory, orderID, "")
	if err != nil {
		return "", err
	}
	if len(dl) != 0 {
		return "", fmt.Errorf("%d dead letters for %s, want 0", len(dl), orderID)
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", err
	}
	effectsOnce, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("inventory failed %d times and was retried (retries +%v), DLQ 0; %s", failures, retriesAfter-retriesBefore, effectsOnce), nil
}

// failPointBeforeCommit is the order service's fail point after a state
// change and its outbox row are written, before the commit
// (services/order/internal/adapters).
const failPointBeforeCommit = "order.before-commit"

// Tutorial: "当业务事务回滚时，不得留下可投递的 Outbox 记录" (a rolled-back
// business transaction leaves no deliverable outbox row).
func lossRollback(s *session) (seen string, err error) {
	orderID := s.orderID("")
	var res commandResult
	if err := s.api.Call(s.ctx, Order, "POST", "/orders", map[string]any{"orderId": orderID, "customerId": "C-drill", "currency": "CNY",
		"items": []map[string]any{{"sku": s.sku(""), "quantity": 1, "unitPrice": "40.00"}}}, &res); err != nil {
		return "", err
	}
	if res.BusinessCode != "SUCCESS" {
		return "", fmt.Errorf("create %s: businessCode %s", orderID, res.BusinessCode)
	}
	if err := s.waitRelayed(orderID, 1); err != nil {
		return "", err
	}
	if err := s.api.ArmFailPoint(s.ctx, Order, failPointBeforeCommit, "error", 1); err != nil {
		return "", err
	}
	defer func() {
		if derr := s.api.ArmFailPoint(s.ctx, Order, failPointBeforeCommit, "off", 0); derr != nil {
			err = errors.Join(err, fmt.Errorf("disarm %s: %w", failPointBeforeCommit, derr))
		}
	}()
	checkout := "/orders/" + url.PathEscape(orderID) + "/checkout"
	// One command, sent again after its 500 with the same key, as a
	// client retries: a 5xx is not kept, so the retry runs it.
	key, err := suiteapi.NewIdempotencyKey()
	if err != nil {
		return "", err
	}
	keyed := http.Header{suiteapi.IdempotencyKeyHeader: {key}}
	res = commandResult{}
	code, err := s.api.Do(s.ctx, Order, "POST", checkout, keyed, nil, &res, http.StatusInternalServerError)
	if err != nil {
		return "", err
	}
	if code != http.StatusInternalServerError {
		return "", fmt.Errorf("checkout with %s armed answered %d %s, want 500 (the fail point did not fire?)", failPointBeforeCommit, code, res.BusinessCode)
	}
	if err := s.api.FailPointFired(s.ctx, Order, failPointBeforeCommit, 1); err != nil {
		return "", err
	}
	o, err := s.api.Order(s.ctx, orderID)
	if err != nil {
		return "", err
	}
	if o.Status != "CREATED" || o.Version != 1 {
		return "", fmt.Errorf("after the rollback the order is %s v%d, want CREATED v1 (unchanged)", o.Status, o.Version)
	}
	rows, err := s.outboxRows(Order, orderID)
	if err != nil {
		return "", err
	}
	if len(rows) != 1 || rows[0].EventType != "OrderCreated" {
		return "", fmt.Errorf("after the rollback %s has outbox rows %s, want OrderCreated only", orderID, describeRows(rows))
	}

	// Disarmed (it fired once), the same request with the same key goes
	// through.
	start := time.Now()
	res = commandResult{}
	if _, err := s.api.Do(s.ctx, Order, "POST", checkout, keyed, nil, &res); err != nil {
		return "", err
	}
	if res.BusinessCode != "SUCCESS" || res.Status != "PENDING_PAYMENT" || res.Version != 2 {
		return "", fmt.Errorf("the checkout again: %s %s v%d, want SUCCESS PENDING_PAYMENT v2", res.BusinessCode, res.Status, res.Version)
	}
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	rows, err = s.outboxRows(Order, orderID)
	if err != nil {
		return "", err
	}
	if len(rows) != 2 || rows[1].EventType != "OrderCheckedOut" {
		return "", fmt.Errorf("after the checkout %s has outbox rows %s, want OrderCreated, OrderCheckedOut", orderID, describeRows(rows))
	}
	return fmt.Sprintf("%s fired: checkout answered %d, order still CREATED v1 with 1 outbox row (OrderCreated); the same checkout: PENDING_PAYMENT v2, exactly 1 OrderCheckedOut row, SENT",
		failPointBeforeCommit, code), nil
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
