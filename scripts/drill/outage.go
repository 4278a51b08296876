package drill

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// The broker windows of the tutorial's table (丢失窗口与证据) and its
// outage case, driven through a BrokerController (and a ServiceStopper for
// the callback sink): `make run`'s control API or the test harness.

// lostAcks is how many Produce requests lose their acknowledgement: every
// try of one relay attempt, since the services' producer retries a
// timed-out request three times (pkg/messaging: Producer.Retry.Max = 3).
// The attempt fails although each try reached the log, so the relay sends
// the same eventId again in its next attempt.
const lostAcks = 4

// outboxRows lists the outbox rows of aggregateID on service (order or
// payment), oldest first.
func (s *session) outboxRows(service, aggregateID string) []outboxRow {
	return must(s.api.Outbox(s.ctx, service, aggregateID)).Events
}

// outboxRowOf returns the only row of eventType among aggregateID's rows on
// service, and whether there is one yet.
func (s *session) outboxRowOf(service, aggregateID, eventType string) (outboxRow, bool, error) {
	backlog, err := s.api.Outbox(s.ctx, service, aggregateID)
	if err != nil {
		return outboxRow{}, false, err
	}
	var found []outboxRow
	for _, r := range backlog.Events {
		if r.EventType == eventType {
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return outboxRow{}, false, nil
	case 1:
		return found[0], true, nil
	}
	return outboxRow{}, false, fmt.Errorf("%s holds %d %s rows for %s, want 1", service, len(found), eventType, aggregateID)
}

// waitOutboxRow waits until aggregateID's row of eventType on service is
// there and, if status is not "", has that status.
func (s *session) waitOutboxRow(what, service, aggregateID, eventType, status string) outboxRow {
	var row outboxRow
	s.waitUntil(what, func() (string, bool, error) {
		r, ok, err := s.outboxRowOf(service, aggregateID, eventType)
		row = r
		return r.Status, ok && (status == "" || r.Status == status), err
	})
	return row
}

// backoffWatch is what an outage drill saw of one outbox row while its
// sink was away.
type backoffWatch struct {
	row    outboxRow
	delays []time.Duration // the wait chosen after each failed attempt seen
}

func (w backoffWatch) describe() string {
	parts := make([]string, len(w.delays))
	for i, d := range w.delays {
		parts[i] = formatDuration(d)
	}
	return strings.Join(parts, " ")
}

// watchPending polls service's eventType row of aggregateID for d and fails
// as soon as it is anything but PENDING. Each time its attempts grow it
// notes the wait before the next attempt (next_attempt_at - now, read on
// the drill's clock: the suite's must agree).
func (s *session) watchPending(service, aggregateID, eventType string, d time.Duration) (backoffWatch, error) {
	var w backoffWatch
	seen := false
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(suiteapi.DefaultPollInterval)
	defer tick.Stop()
	for {
		row, ok, err := s.outboxRowOf(service, aggregateID, eventType)
		if err != nil {
			return w, err
		}
		if ok {
			if row.Status != outbox.StatusPending {
				return w, fmt.Errorf("%s %s of %s is %s during the outage, want PENDING", service, eventType, aggregateID, row.Status)
			}
			if row.Attempts > w.row.Attempts {
				w.delays = append(w.delays, time.Until(row.NextAttemptAt))
			}
			w.row, seen = row, true
		}
		select {
		case <-s.ctx.Done():
			return w, s.ctx.Err()
		case <-deadline.C:
			if !seen {
				return w, fmt.Errorf("no %s row of %s on %s within the outage", eventType, aggregateID, service)
			}
			return w, nil
		case <-tick.C:
		}
	}
}

// checkBackoff is the outage's promise about the row: the relay kept
// trying, further and further apart. The backoff grew when the last wait is
// longer than the first: with ±50 % jitter two neighbouring waits may come
// out the other way round, but from the third attempt on the nominal wait
// is four times the first, so the last outgrows the first whatever the
// jitter.
func checkBackoff(w backoffWatch, outage time.Duration) error {
	if w.row.Attempts < 3 {
		return fmt.Errorf("%d attempts in a %s outage, want at least 3 (the relay keeps trying; is the outage longer than three backoff intervals?)",
			w.row.Attempts, formatDuration(outage))
	}
	if len(w.delays) < 2 || w.delays[len(w.delays)-1] <= w.delays[0] {
		return fmt.Errorf("the backoff did not grow over %d attempts: waits %s", w.row.Attempts, w.describe())
	}
	return nil
}

// probeTopicSuffix names the topic loss/lost-ack arms a fault on to learn
// whether the broker can be faulted at all: nothing produces to it.
const probeTopicSuffix = ".drill-fault-probe"

// stopper returns the target's ServiceStopper, or skips the case.
func (s *session) stopper() ServiceStopper {
	stopper, ok := s.t.Controller.(ServiceStopper)
	if !ok {
		check(skip("the controller cannot stop a service"))
	}
	return stopper
}

// brokerControl returns the target's BrokerController, or skips the case:
// also when the broker is not the controller's, which clearing its faults
// (harmless) tells early.
func (s *session) brokerControl() BrokerController {
	bc, ok := s.t.Controller.(BrokerController)
	if !ok {
		check(skip("the controller cannot stop the broker or fault it"))
	}
	check(skipIfNoBroker(errOf(bc.ClearFault(s.ctx))))
	return bc
}

// Tutorial window "Broker 确认丢失 — 生产者不知道是否成功 — 使用相同 eventId 重发，
// 消费者幂等" (the broker's acknowledgement is lost: the producer does not
// know; re-sent with the same eventId, the consumers are idempotent).
func lossLostAck(s *session) string {
	bc := s.brokerControl()
	// A broker that can be stopped but not faulted (compose without its
	// fault proxy) refuses to arm: tried on a topic nothing writes, before
	// the case touches the suite, so this case alone is skipped.
	if _, err := bc.ArmFault(s.ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Topic: s.t.Topic + probeTopicSuffix, Count: 1}); err != nil {
		check(skipIfNoBroker(fmt.Errorf("arm a lost acknowledgement: %w", err)))
	}
	check(errOf(bc.ClearFault(s.ctx)))
	handledBefore := s.counts(handled, consumers...)
	o := s.placedRelayed(2)
	marks := must(s.api.EndOffsets(s.ctx))
	checkf(errOf(bc.ArmFault(s.ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Topic: s.t.Topic, Count: lostAcks})), "arm the lost acknowledgements")
	s.cleanup("clear the broker fault", func(ctx context.Context) error { return errOf(bc.ClearFault(ctx)) })
	start := time.Now()
	s.pay(o)
	row := s.waitOutboxRow("OrderPaid of "+o.id+" marked SENT", Order, o.id, "OrderPaid", outbox.StatusSent)
	fault := must(bc.Broker(s.ctx)).Fault
	if fault == nil {
		fail("no broker fault is armed: the controller lost it")
	}
	hits := fault.Hits
	if hits < 1 {
		fail("no Produce request lost its acknowledgement: the fault never fired")
	}
	if row.Attempts < 2 {
		fail("OrderPaid %s SENT after %d attempt(s) and %d lost acks, want at least 2 (the relay sends it again)", row.EventID, row.Attempts, hits)
	}
	copies := must(s.api.CountSince(s.ctx, marks, row.EventID))
	if copies < 2 {
		fail("OrderPaid %s is on the topic %d time(s), want the lost-ack copy and the re-send (at least 2)", row.EventID, copies)
	}
	// Every consumer reads OrderCreated, OrderCheckedOut and every copy.
	s.waitGrown(handled, handledBefore, 2+copies, "the copies read by each consumer")
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	return fmt.Sprintf("%d Produce requests lost their acknowledgement after the append; OrderPaid SENT after %d relay attempts; on the topic %d times with the same eventId, each copy read by every consumer; %s",
		hits, row.Attempts, copies, s.paidOnce(o, row.EventID))
}

// outage keeps a sink (what) away for the target's outage while the relay
// of service tries to deliver orderID's eventType row (named row): down
// takes it away, calling gone once it is, and up brings it back. It checks
// the row stays PENDING and backs off, waits until the order's payment is
// applied after the return and checks the backoff grew. It returns the
// watch and what it saw.
func (s *session) outage(what, row, service, orderID, eventType string, down func(gone func()), up func(ctx context.Context) error) (backoffWatch, string) {
	var back func()
	down(func() { back = s.cleanup("start the "+what+" again", up) })
	w := must(s.watchPending(service, orderID, eventType, s.t.Outage))
	if service == Order {
		s.noEffects(orderID, "while the broker was down")
	}
	back()
	// The row goes at its next attempt, however far the backoff has put it.
	due := max(0, time.Until(w.row.NextAttemptAt))
	drained := s.waitEffectsFor(due+s.t.Timeout, orderID+" applied after the return", orderID, "DEDUCTED", 1, 1)
	s.converged = drained
	check(checkBackoff(w, s.t.Outage))
	return w, fmt.Sprintf("%s down %s: %s PENDING throughout, %d failed attempts, waits %s; back: next attempt due in %s, drained in %s",
		what, formatDuration(s.t.Outage), row, w.row.Attempts, w.describe(), formatDuration(due), formatDuration(drained))
}

// Tutorial: "当 Broker 暂时不可用时，PENDING 事件保留并带退避重试" — the broker is
// unreachable for the outage: the row stays PENDING, its attempts grow and
// next_attempt_at backs off with jitter; everything drains once it is back.
func lossBrokerOutage(s *session) string {
	bc := s.brokerControl()
	o := s.placedRelayed(2)
	// The payment and its callback are HTTP: the order service commits
	// PAID and the OrderPaid row, which the relay cannot send.
	w, seen := s.outage("broker", "OrderPaid", Order, o.id, "OrderPaid", func(gone func()) {
		checkf(errOf(bc.StopBroker(s.ctx)), "stop the broker")
		gone()
		s.pay(o)
	}, func(ctx context.Context) error { return errOf(bc.StartBroker(ctx)) })
	s.waitSent(w.row.EventID)
	return seen + "; " + s.paidOnce(o, w.row.EventID)
}

// paymentCallback is the callback row the payment service writes with a
// payment (services/payment/internal/callback).
const paymentCallback = "PAYMENT_SUCCEEDED"

// The same for the callback sink: the order service is down, the payment's
// callback stays PENDING and backs off, and is delivered once it is back.
func lossCallbackOutage(s *session) string {
	stopper := s.stopper()
	o := s.placedRelayed(2)
	_, seen := s.outage("order service", "callback", Payment, o.id, paymentCallback, func(gone func()) {
		// The payment service looks the order up before charging, so the
		// order service goes away between the charge and the callback:
		// the callback relay is held until then.
		release := s.arm(Payment, outbox.FailPointBeforePublish, "error", 0)
		s.pay(o)
		s.waitOutboxRow("the callback of "+o.id+" in the payment outbox", Payment, o.id, paymentCallback, "")
		s.waitFired(Payment, outbox.FailPointBeforePublish, 1)
		checkf(errOf(stopper.Stop(s.ctx, Order)), "stop the order service")
		gone()
		release()
	}, s.startUsual(Order))
	// The relay marks the callback SENT once the order service has
	// answered, which may be after the consumers applied what the answer
	// set off: wait for it rather than read it once.
	cb := s.waitOutboxRow("the callback of "+o.id+" marked SENT", Payment, o.id, paymentCallback, outbox.StatusSent)
	s.orderIs(o.id, "PAID", 3, "once delivered")
	return fmt.Sprintf("%s (callback SENT after %d attempts, PAID v3, 1 OrderPaid); %s", seen, cb.Attempts, s.paidOnce(o, ""))
}
