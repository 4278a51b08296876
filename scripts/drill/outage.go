package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
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

// outboxRow is one row of GET /admin/outbox?aggregateId=.
type outboxRow struct {
	EventID       string    `json:"eventId"`
	EventType     string    `json:"eventType"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	NextAttemptAt time.Time `json:"nextAttemptAt"`
}

// outboxRows lists the outbox rows of aggregateID on service (order or
// payment), oldest first.
func (s *session) outboxRows(service, aggregateID string) ([]outboxRow, error) {
	var out struct {
		Events []outboxRow `json:"events"`
	}
	err := s.api.Call(s.ctx, service, "GET", "/admin/outbox?aggregateId="+url.QueryEscape(aggregateID), nil, &out)
	return out.Events, err
}

// outboxRowOf returns the only row of eventType among aggregateID's rows on
// service, and whether there is one yet.
func (s *session) outboxRowOf(service, aggregateID, eventType string) (outboxRow, bool, error) {
	rows, err := s.outboxRows(service, aggregateID)
	if err != nil {
		return outboxRow{}, false, err
	}
	var found []outboxRow
	for _, r := range rows {
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

// backoffWatch is what an outage drill saw of one outbox row while its
// sink was away.
type backoffWatch struct {
	row    outboxRow
	delays []time.Duration // the wait chosen after each failed attempt seen
}

// attempts is how often the relay tried the row.
func (w backoffWatch) attempts() int { return w.row.Attempts }

// grew says the backoff grew: the last wait is longer than the first. With
// ±50 % jitter two neighbouring waits may come out the other way round;
// from the third attempt on, the nominal wait is four times the first, so
// the last outgrows the first whatever the jitter.
func (w backoffWatch) grew() bool {
	return len(w.delays) >= 2 && w.delays[len(w.delays)-1] > w.delays[0]
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
// trying, further and further apart.
func checkBackoff(w backoffWatch, outage time.Duration) error {
	if w.attempts() < 3 {
		return fmt.Errorf("%d attempts in a %s outage, want at least 3 (the relay keeps trying; is the outage longer than three backoff intervals?)",
			w.attempts(), formatDuration(outage))
	}
	if !w.grew() {
		return fmt.Errorf("the backoff did not grow over %d attempts: waits %s", w.attempts(), w.describe())
	}
	return nil
}

// dueAfter is how long after t the row's next attempt was due (0 if it was
// already due).
func dueAfter(row outboxRow, t time.Time) time.Duration {
	return max(0, row.NextAttemptAt.Sub(t))
}

// Tutorial window "Broker 确认丢失 — 生产者不知道是否成功 — 使用相同 eventId 重发，
// 消费者幂等" (the broker's acknowledgement is lost: the producer does not
// know; re-sent with the same eventId, the consumers are idempotent).
// probeTopicSuffix names the topic loss/lost-ack arms a fault on to learn
// whether the broker can be faulted at all: nothing produces to it.
const probeTopicSuffix = ".drill-fault-probe"

func lossLostAck(s *session) (seen string, err error) {
	bc, err := brokerControl(s)
	if err != nil {
		return "", err
	}
	// Clearing is harmless and tells early whether the broker is ours.
	if err := bc.ClearFaults(s.ctx); err != nil {
		return "", skipIfNoBroker(err)
	}
	// A broker that can be stopped but not faulted (compose without its
	// fault proxy) refuses to arm: tried on a topic nothing writes, before
	// the case touches the suite, so this case alone is skipped.
	if err := bc.LoseAcks(s.ctx, s.t.Topic+probeTopicSuffix, 1); err != nil {
		return "", skipIfNoBroker(fmt.Errorf("arm a lost acknowledgement: %w", err))
	}
	if err := bc.ClearFaults(s.ctx); err != nil {
		return "", err
	}
	const quantity = 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	handledBefore, err := s.handledNow()
	if err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", err
	}
	// OrderCreated and OrderCheckedOut leave first, so the fault hits the
	// payment's event and nothing earlier.
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", err
	}
	marks, err := s.api.EndOffsets(s.ctx)
	if err != nil {
		return "", err
	}
	if err := bc.LoseAcks(s.ctx, s.t.Topic, lostAcks); err != nil {
		return "", fmt.Errorf("arm the lost acknowledgements: %w", err)
	}
	defer func() {
		if cerr := bc.ClearFaults(context.WithoutCancel(s.ctx)); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clear the broker fault: %w", cerr))
		}
	}()
	start := time.Now()
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	var row outboxRow
	if _, err := s.waitUntil("OrderPaid of "+orderID+" marked SENT", func() (bool, error) {
		r, ok, err := s.outboxRowOf(Order, orderID, "OrderPaid")
		row = r
		return ok && r.Status == outbox.StatusSent, err
	}); err != nil {
		return "", err
	}
	hits, err := bc.LostAcks(s.ctx)
	if err != nil {
		return "", err
	}
	if hits < 1 {
		return "", errors.New("no Produce request lost its acknowledgement: the fault never fired")
	}
	if row.Attempts < 2 {
		return "", fmt.Errorf("OrderPaid %s SENT after %d attempt(s) and %d lost acks, want at least 2 (the relay sends it again)", row.EventID, row.Attempts, hits)
	}
	copies, err := s.copiesSince(marks, row.EventID)
	if err != nil {
		return "", err
	}
	if copies < 2 {
		return "", fmt.Errorf("OrderPaid %s is on the topic %d time(s), want the lost-ack copy and the re-send (at least 2)", row.EventID, copies)
	}
	// Every consumer reads OrderCreated, OrderCheckedOut and every copy.
	if _, err := s.waitHandled(handledBefore, 2+copies); err != nil {
		return "", fmt.Errorf("the copies: %w", err)
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	effectsOnce, err := s.paidOnce(orderID, row.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d Produce requests lost their acknowledgement after the append; OrderPaid SENT after %d relay attempts; on the topic %d times with the same eventId, each copy read by every consumer; %s",
		hits, row.Attempts, copies, effectsOnce), nil
}

// Tutorial: "当 Broker 暂时不可用时，PENDING 事件保留并带退避重试" — the broker is
// unreachable for the outage: the row stays PENDING, its attempts grow and
// next_attempt_at backs off with jitter; everything drains once it is back.
func lossBrokerOutage(s *session) (seen string, err error) {
	bc, err := brokerControl(s)
	if err != nil {
		return "", err
	}
	if err := bc.ClearFaults(s.ctx); err != nil {
		return "", skipIfNoBroker(err)
	}
	const quantity = 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", err
	}
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", err
	}
	if err := bc.StopBroker(s.ctx); err != nil {
		return "", fmt.Errorf("stop the broker: %w", err)
	}
	up := false
	defer func() {
		if up {
			return
		}
		if serr := bc.StartBroker(context.WithoutCancel(s.ctx)); serr != nil {
			err = errors.Join(err, fmt.Errorf("start the broker again: %w", serr))
		}
	}()
	// The payment and its callback are HTTP: the order service commits
	// PAID and the OrderPaid row, which the relay cannot send.
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	w, err := s.watchPending(Order, orderID, "OrderPaid", s.t.Outage)
	if err != nil {
		return "", err
	}
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if eff.Inventory != "NONE" || len(eff.Ledger) != 0 || len(eff.Notifications) != 0 {
		return "", fmt.Errorf("while the broker was down: %s, want NONE, 0, 0", eff)
	}
	if err := bc.StartBroker(s.ctx); err != nil {
		return "", fmt.Errorf("start the broker again: %w", err)
	}
	up = true
	back := time.Now()
	// The row goes at its next attempt, however far the backoff has put it.
	due := dueAfter(w.row, back)
	drained, err := s.waitForEffects(due, orderID)
	if err != nil {
		return "", err
	}
	s.converged = drained
	if err := checkBackoff(w, s.t.Outage); err != nil {
		return "", err
	}
	if _, err := waitSent(s, w.row.EventID); err != nil {
		return "", err
	}
	effectsOnce, err := s.paidOnce(orderID, w.row.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("broker down %s: OrderPaid PENDING throughout, %d failed attempts, waits %s; back: next attempt due in %s, drained in %s; %s",
		formatDuration(s.t.Outage), w.attempts(), w.describe(), formatDuration(due), formatDuration(drained), effectsOnce), nil
}

// waitForEffects waits until the consumers have applied the order's
// payment, allowing the time until the relay's next attempt on top of the
// timeout, and returns how long that took.
func (s *session) waitForEffects(due time.Duration, orderID string) (time.Duration, error) {
	var last effects
	took, err := s.api.WaitFor(s.ctx, due+s.t.Timeout, orderID+" applied after the return", func() (bool, error) {
		var err error
		last, err = s.effects(orderID)
		return last.Inventory == "DEDUCTED" && len(last.Ledger) == 1 && len(last.Notifications) == 1, err
	})
	if err != nil {
		return took, fmt.Errorf("%w; seen %s", err, last)
	}
	return took, nil
}

// paymentCallback is the callback row the payment service writes with a
// payment (services/payment/internal/callback).
const paymentCallback = "PAYMENT_SUCCEEDED"

// The same for the callback sink: the order service is down, the payment's
// callback stays PENDING and backs off, and is delivered once it is back.
func lossCallbackOutage(s *session) (seen string, err error) {
	stopper, ok := s.t.Controller.(ServiceStopper)
	if !ok {
		return "", skip("the controller cannot stop a service")
	}
	const quantity = 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, quantity, "40.00")
	if err != nil {
		return "", err
	}
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", err
	}
	// The payment service looks the order up before charging, so the order
	// service goes away between the charge and the callback: the callback
	// relay is held until then.
	if err := s.api.ArmFailPoint(s.ctx, Payment, outbox.FailPointBeforePublish, "error", 0); err != nil {
		return "", err
	}
	held := true
	defer func() {
		if !held {
			return
		}
		if derr := s.api.ArmFailPoint(s.ctx, Payment, outbox.FailPointBeforePublish, "off", 0); derr != nil {
			err = errors.Join(err, fmt.Errorf("release the payment relay: %w", derr))
		}
	}()
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	if _, err := s.waitUntil("the callback of "+orderID+" in the payment outbox", func() (bool, error) {
		_, ok, err := s.outboxRowOf(Payment, orderID, paymentCallback)
		return ok, err
	}); err != nil {
		return "", err
	}
	if err := s.waitFired(Payment, outbox.FailPointBeforePublish, 1); err != nil {
		return "", fmt.Errorf("the held payment relay: %w", err)
	}
	if err := stopper.Stop(s.ctx, Order); err != nil {
		return "", fmt.Errorf("stop the order service: %w", err)
	}
	down := true
	defer func() {
		if !down {
			return
		}
		if rerr := s.t.Controller.Restart(context.WithoutCancel(s.ctx), Order, nil); rerr != nil {
			err = errors.Join(err, fmt.Errorf("start the order service again: %w", rerr))
		}
	}()
	if err := s.api.ArmFailPoint(s.ctx, Payment, outbox.FailPointBeforePublish, "off", 0); err != nil {
		return "", fmt.Errorf("release the payment relay: %w", err)
	}
	held = false
	w, err := s.watchPending(Payment, orderID, paymentCallback, s.t.Outage)
	if err != nil {
		return "", err
	}
	if err := s.t.Controller.Restart(s.ctx, Order, nil); err != nil {
		return "", fmt.Errorf("start the order service again: %w", err)
	}
	down = false
	back := time.Now()
	due := dueAfter(w.row, back)
	drained, err := s.waitForEffects(due, orderID)
	if err != nil {
		return "", err
	}
	s.converged = drained
	if err := checkBackoff(w, s.t.Outage); err != nil {
		return "", err
	}
	cb, _, err := s.outboxRowOf(Payment, orderID, paymentCallback)
	if err != nil {
		return "", err
	}
	if cb.Status != outbox.StatusSent {
		return "", fmt.Errorf("the callback is %s after the order was applied, want SENT", cb.Status)
	}
	o, err := s.api.Order(s.ctx, orderID)
	if err != nil {
		return "", err
	}
	if o.Status != "PAID" || o.Version != 3 {
		return "", fmt.Errorf("the order is %s v%d, want PAID v3", o.Status, o.Version)
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", err
	}
	effectsOnce, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("order service down %s: callback PENDING throughout, %d failed attempts, waits %s; back: next attempt due in %s, drained in %s (callback SENT after %d attempts, PAID v3, 1 OrderPaid); %s",
		formatDuration(s.t.Outage), w.attempts(), w.describe(), formatDuration(due), formatDuration(drained), cb.Attempts, effectsOnce), nil
}

// copiesSince counts the records written to the order events topic after
// marks whose envelope carries eventID.
func (s *session) copiesSince(marks map[int32]int64, eventID string) (int, error) {
	ends, err := s.api.EndOffsets(s.ctx)
	if err != nil {
		return 0, err
	}
	from := map[int32]kgo.Offset{}
	left := map[int32]int64{}
	for p, end := range ends {
		if end > marks[p] {
			from[p] = kgo.NewOffset().At(marks[p])
			left[p] = end
		}
	}
	if len(from) == 0 {
		return 0, nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.t.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.t.Topic: from}))
	if err != nil {
		return 0, fmt.Errorf("kafka client for %v: %w", s.t.Brokers, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	copies := 0
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return 0, fmt.Errorf("read %s back to count %s: %w", s.t.Topic, eventID, ctx.Err())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, open := left[r.Partition]
			if !open || r.Offset >= end {
				return
			}
			var head struct {
				EventID string `json:"eventId"`
			}
			if json.Unmarshal(r.Value, &head) == nil && head.EventID == eventID {
				copies++
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
		})
	}
	return copies, nil
}
