package drill

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Tutorial: "打乱事件顺序，阻止状态倒退" (shuffle the events, stop the state
// from going backwards) — the aggregate-version guard of `apply_event`.
func reorderCases() []Case {
	return []Case{
		newCase("reorder", "refund-before-payment",
			"REFUNDED v5 before PAID v3: v5 parked with no effect, then v3 and v5 applied in version order",
			false, reorderRefundBeforePayment),
		newCase("reorder", "late-created",
			"CREATED v1, and a second PAID v3 with a new eventId, after PAID v3: read and ignored, state stays DEDUCTED",
			false, reorderLateCreated),
		newCase("reorder", "orders-in-parallel",
			"PAID v3 then REFUNDED v5 of 2 orders per partition, all published at once: every order RESTOCKED with its v3 applied before its v5 "+
				"and none parked (WAITING_FOR_GAP +0) — one order at a time — while the orders of every partition converged; a drill sees final state and outcome counts, not the concurrency itself",
			false, reorderOrdersInParallel),
		newCase("reorder", "cross-client-partition",
			"OrderPaid of 8 orders from franz-go's default partitioner: each on the partition the services' murmur2 partitioner (pkg/messaging.KeyPartition) computes, and applied by every consumer",
			false, reorderCrossClientPartition),
		newCase("reorder", "gap-deadline",
			"REFUNDED v5 whose PAID v3 never comes: parked, then dead-lettered after PARK_DEADLINE by every consumer (PERMANENT WAITING_FOR_GAP, consumer_gap_timeouts_total +1), no effect",
			false, reorderGapDeadline),
	}
}

const reorderStock = 10

// Tutorial row "REFUNDED(v5) 先于 REFUNDING(v4) — 缓存/延迟或按版本拒绝回退".
func reorderRefundBeforePayment(s *session) (string, error) {
	const quantity, amount, points = 4, "40.00", 40
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, reorderStock); err != nil {
		return "", err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, amount)
	if err != nil {
		return "", err
	}
	refunded, err := ev.refunded()
	if err != nil {
		return "", err
	}
	paid, err := ev.paid()
	if err != nil {
		return "", err
	}

	if err := s.api.Publish(s.ctx, refunded); err != nil {
		return "", err
	}
	// A parked event keeps its dedup row: each consumer has read it.
	if _, err := s.waitUntil("REFUNDED v5 read by each consumer", func() (bool, error) {
		for _, c := range consumers {
			if n, err := s.api.ProcessedEventCount(s.ctx, c, refunded.EventID); err != nil || n != 1 {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
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
	if st.Available != reorderStock || st.Deducted != 0 || eff.Inventory != "NONE" || len(eff.Ledger) != 0 || len(eff.Notifications) != 0 {
		return "", fmt.Errorf("a refund before its payment had an effect: stock %d/%d, %s", st.Available, st.Deducted, eff)
	}

	start := time.Now()
	if err := s.api.Publish(s.ctx, paid); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "RESTOCKED", 2, 2); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	if st, err = s.api.Stock(s.ctx, sku); err != nil {
		return "", err
	}
	if st.Available != reorderStock || st.Deducted != 0 {
		return "", fmt.Errorf("stock not conserved: %d available, %d deducted; want %d, 0", st.Available, st.Deducted, reorderStock)
	}
	if eff, err = s.effects(orderID); err != nil {
		return "", err
	}
	if eff.Ledger[0].Points != points || eff.Ledger[1].Points != -points {
		return "", fmt.Errorf("ledger %+v, want +%d then -%d", eff.Ledger, points, points)
	}
	if eff.Notifications[0].EventID != paid.EventID || eff.Notifications[1].EventID != refunded.EventID {
		return "", fmt.Errorf("notifications %+v, want the payment's before the refund's", eff.Notifications)
	}
	return fmt.Sprintf("v5 parked (stock %d/0, ledger 0, notifications 0); after v3: RESTOCKED, stock %d/0, ledger +%d -%d, notifications paid then refunded",
		reorderStock, reorderStock, points, points), nil
}

// Tutorial row "PAID(v3) 后收到 CREATED(v1) — 忽略旧版本，订单仍为已支付" and
// `test_当旧事件晚到时_订单状态不回退`.
func reorderLateCreated(s *session) (string, error) {
	const quantity = 3
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, reorderStock); err != nil {
		return "", err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, "30.00")
	if err != nil {
		return "", err
	}
	paid, err := ev.paid()
	if err != nil {
		return "", err
	}
	created, err := ev.created()
	if err != nil {
		return "", err
	}
	// The same version re-emitted under a new eventId: not a duplicate for
	// the dedup table, only the version guard stops it.
	stale, err := ev.paid()
	if err != nil {
		return "", err
	}
	if err := s.api.Publish(s.ctx, paid); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	before, err := s.handledNow()
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := s.api.Publish(s.ctx, created, stale); err != nil {
		return "", err
	}
	if _, err := s.waitHandled(before, 2); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if eff.Inventory != "DEDUCTED" || len(eff.Ledger) != 1 || len(eff.Notifications) != 1 || st.Deducted != quantity {
		return "", fmt.Errorf("late events moved the state: %s, stock %d/%d; want DEDUCTED, 1, 1, %d deducted",
			eff, st.Available, st.Deducted, quantity)
	}
	if n, err := s.api.ProcessedEventCount(s.ctx, Inventory, stale.EventID); err != nil {
		return "", fmt.Errorf("the stale PAID v3's dedup rows in inventory: %w", err)
	} else if n != 1 {
		return "", fmt.Errorf("the stale PAID v3 has %d dedup rows in inventory, want 1 (recorded as IGNORED_STALE_EVENT)", n)
	}
	return fmt.Sprintf("v1 and a stale v3 read by each consumer, no effect: inventory DEDUCTED, stock %d/%d, ledger 1, notifications 1",
		st.Available, st.Deducted), nil
}

// outcomesNow reads consumer_event_outcomes_total{outcome} of every consumer.
func (s *session) outcomesNow(outcome string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range consumers {
		n, err := s.outcomes(c, outcome)
		if err != nil {
			return nil, err
		}
		out[c] = n
	}
	return out, nil
}

// docs/design.md, Consumers and partitions: one order's events are handled
// one at a time and in order, different orders' in parallel (pkg/messaging
// TestRouterHandlesAnOrderAtATimeAndOrdersInParallel proves the concurrency
// itself). From outside, an order handled out of turn shows as a REFUNDED
// v5 parked for its PAID v3.
func reorderOrdersInParallel(s *session) (string, error) {
	const perPartition, quantity, amount, points = 2, 1, "10.00", 10
	n, err := s.api.Partitions(s.ctx)
	if err != nil {
		return "", err
	}
	sku := s.sku("")
	stockOf := perPartition * n * quantity
	if err := s.api.SetStock(s.ctx, sku, stockOf); err != nil {
		return "", err
	}
	var (
		orders []string
		recs   []*kgo.Record
		paid   = map[string]string{}
		refund = map[string]string{}
	)
	for p := range int32(n) {
		for i := range perPartition {
			id, err := s.sameKeyPartition(s.orderID("-p"+strconv.Itoa(int(p))+"-"+strconv.Itoa(i)+"-"), p, n)
			if err != nil {
				return "", err
			}
			ev, err := s.newOrderEvents(id, sku, quantity, amount)
			if err != nil {
				return "", err
			}
			v3, err := ev.paid()
			if err != nil {
				return "", err
			}
			v5, err := ev.refunded()
			if err != nil {
				return "", err
			}
			for _, env := range []event.Envelope{v3, v5} {
				r, err := suiteapi.Record(s.t.Topic, env)
				if err != nil {
					return "", err
				}
				recs = append(recs, r)
			}
			orders = append(orders, id)
			paid[id], refund[id] = v3.EventID, v5.EventID
		}
	}
	parkedBefore, err := s.outcomesNow("WAITING_FOR_GAP")
	if err != nil {
		return "", err
	}
	appliedBefore, err := s.outcomesNow("APPLIED")
	if err != nil {
		return "", err
	}
	start := time.Now()
	placed, err := s.api.Produce(s.ctx, recs...)
	if err != nil {
		return "", err
	}
	used := map[int32]bool{}
	for _, r := range placed {
		used[r.Partition] = true
	}
	for _, id := range orders {
		if _, err := s.waitEffects(id, "RESTOCKED", 2, 2); err != nil {
			return "", err
		}
	}
	s.converged = time.Since(start)
	for _, id := range orders {
		eff, err := s.effects(id)
		if err != nil {
			return "", err
		}
		if eff.Ledger[0].Points != points || eff.Ledger[1].Points != -points {
			return "", fmt.Errorf("%s: ledger %+v, want +%d then -%d", id, eff.Ledger, points, points)
		}
		if eff.Notifications[0].EventID != paid[id] || eff.Notifications[1].EventID != refund[id] {
			return "", fmt.Errorf("%s: notifications %+v, want the payment's before the refund's", id, eff.Notifications)
		}
	}
	parkedAfter, err := s.outcomesNow("WAITING_FOR_GAP")
	if err != nil {
		return "", err
	}
	appliedAfter, err := s.outcomesNow("APPLIED")
	if err != nil {
		return "", err
	}
	for _, c := range consumers {
		if d := parkedAfter[c] - parkedBefore[c]; d != 0 {
			return "", fmt.Errorf("%s parked %v events waiting for a predecessor: an order's REFUNDED v5 was handled before its PAID v3", c, d)
		}
		if d := appliedAfter[c] - appliedBefore[c]; d < float64(2*len(orders)) {
			return "", fmt.Errorf("%s applied %v events, want %d", c, d, 2*len(orders))
		}
	}
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if st.Available != stockOf || st.Deducted != 0 {
		return "", fmt.Errorf("stock not conserved: %d/%d, want %d/0", st.Available, st.Deducted, stockOf)
	}
	return fmt.Sprintf("%d orders on %d of %d partitions, %d events at once: all RESTOCKED, ledger + then -, notifications paid then refunded; "+
		"each consumer applied %d, parked 0; stock %d/0",
		len(orders), len(used), n, len(recs), 2*len(orders), st.Available), nil
}

// Tutorial: the same key must land on the same partition whichever client
// publishes it. The relay publishes with Sarama and pkg/messaging's murmur2
// partitioner; another service, or a learner's script, uses franz-go's
// default (or the Java client's) — they must agree, or one order's events
// from two producers could be read out of order.
func reorderCrossClientPartition(s *session) (string, error) {
	const orders, quantity = 8, 1
	n, err := s.api.Partitions(s.ctx)
	if err != nil {
		return "", err
	}
	sku := s.sku("")
	if err := s.api.SetStock(s.ctx, sku, orders*quantity); err != nil {
		return "", err
	}
	ids := make([]string, orders)
	recs := make([]*kgo.Record, orders)
	for i := range ids {
		ids[i] = s.orderID("-" + strconv.Itoa(i))
		ev, err := s.newOrderEvents(ids[i], sku, quantity, "10.00")
		if err != nil {
			return "", err
		}
		paid, err := ev.paid()
		if err != nil {
			return "", err
		}
		if recs[i], err = suiteapi.Record(s.t.Topic, paid); err != nil {
			return "", err
		}
	}
	start := time.Now()
	// The session's producer is a plain kgo client: its default partitioner
	// hashes keys with Kafka's murmur2.
	placed, err := s.api.Produce(s.ctx, recs...)
	if err != nil {
		return "", err
	}
	// ProduceSync answers in completion order, not the records' order: the
	// record itself says which order it was.
	used := map[int32]bool{}
	for _, r := range placed {
		key := string(r.Key)
		want, err := messaging.KeyPartition(key, int32(n))
		if err != nil {
			return "", err
		}
		if r.Partition != want {
			return "", fmt.Errorf("%s: franz-go put it on partition %d, the services' partitioner on %d", key, r.Partition, want)
		}
		used[r.Partition] = true
	}
	for _, id := range ids {
		if _, err := s.waitEffects(id, "DEDUCTED", 1, 1); err != nil {
			return "", err
		}
	}
	s.converged = time.Since(start)
	return fmt.Sprintf("%d orders on %d of %d partitions, each where pkg/messaging's murmur2 puts its key; all DEDUCTED, ledger 1, notifications 1",
		orders, len(used), n), nil
}

// docs/design.md, Version guard and parking: a gap that never fills is
// dead-lettered after PARK_DEADLINE and counted
// (consumer_gap_timeouts_total).
func reorderGapDeadline(s *session) (string, error) {
	if s.t.ParkDeadline > MaxParkDeadline {
		return "", skip(fmt.Sprintf("PARK_DEADLINE is %s, longer than the %s this drill waits: run the suite and the drill with a short one (e.g. PARK_DEADLINE=10s)",
			s.t.ParkDeadline, MaxParkDeadline))
	}
	const quantity = 2
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, reorderStock); err != nil {
		return "", err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, "20.00")
	if err != nil {
		return "", err
	}
	refunded, err := ev.refunded()
	if err != nil {
		return "", err
	}
	timeouts := func() (map[string]float64, error) {
		out := map[string]float64{}
		for _, c := range consumers {
			n, err := s.api.Metric(s.ctx, c, "consumer_gap_timeouts_total", nil)
			if err != nil {
				return nil, err
			}
			out[c] = n
		}
		return out, nil
	}
	before, err := timeouts()
	if err != nil {
		return "", err
	}
	start := time.Now()
	if err := s.api.Publish(s.ctx, refunded); err != nil {
		return "", err
	}
	// The sweep runs every PARK_SWEEP_INTERVAL (10 s by default) after the
	// deadline has passed.
	wait := s.t.Timeout + 2*s.t.ParkDeadline
	var held time.Duration
	for _, c := range consumers {
		var dl []deadLetter
		if _, err := s.api.WaitFor(s.ctx, wait, c+" dead-letters the parked "+orderID, func() (bool, error) {
			var err error
			dl, err = s.api.DeadLetters(s.ctx, c, orderID, "")
			return len(dl) > 0, err
		}); err != nil {
			return "", err
		}
		if len(dl) != 1 {
			return "", fmt.Errorf("%s holds %d dead letters for %s, want 1", c, len(dl), orderID)
		}
		if err := checkMetadata(s, c, dl[0], refunded.EventID, "PERMANENT", 1); err != nil {
			return "", err
		}
		if code := reasonCode(dl[0].FailureReason); code != "WAITING_FOR_GAP" {
			return "", fmt.Errorf("%s's dead letter: failureReason %q, want WAITING_FOR_GAP", c, dl[0].FailureReason)
		}
		// firstFailedAt is when it was parked; both times are the suite's.
		h := dl[0].DeadLetteredAt.Sub(dl[0].FirstFailedAt)
		if h < s.t.ParkDeadline {
			return "", fmt.Errorf("%s dead-lettered it %s after parking it, before the %s deadline", c, h.Round(time.Millisecond), s.t.ParkDeadline)
		}
		held = max(held, h)
	}
	s.converged = time.Since(start)
	after, err := timeouts()
	if err != nil {
		return "", err
	}
	for _, c := range consumers {
		if d := after[c] - before[c]; d < 1 {
			return "", fmt.Errorf("%s: consumer_gap_timeouts_total +%v, want +1", c, d)
		}
	}
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if st.Available != reorderStock || st.Deducted != 0 || eff.Inventory != "NONE" || len(eff.Ledger) != 0 || len(eff.Notifications) != 0 {
		return "", fmt.Errorf("a refund without its payment had an effect: stock %d/%d, %s", st.Available, st.Deducted, eff)
	}
	return fmt.Sprintf("v5 parked, then dead-lettered by %d consumers after at most %s (PARK_DEADLINE %s): PERMANENT WAITING_FOR_GAP, attempts 1, gap timeouts +1 each; stock %d/0, no effect",
		len(consumers), held.Round(10*time.Millisecond), s.t.ParkDeadline, st.Available), nil
}
