package drill

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

const reorderStock = 10

// synthetic seeds the case's SKU with stock units and returns the events
// of a synthetic order of quantity of it for amount.
func (s *session) synthetic(suffix string, quantity int, amount string, stock int) orderEvents {
	return s.newOrderEvents(s.orderID(suffix), s.seeded("", stock), quantity, amount)
}

// appliedInOrder checks an order's payment (paidID, worth points) and
// its refund (refundID) were applied in that order: the ledger credits
// then debits, the customer is told of the payment first.
func (s *session) appliedInOrder(orderID string, points int64, paidID, refundID string) {
	eff := s.effects(orderID)
	if eff.Ledger[0].Points != points || eff.Ledger[1].Points != -points {
		fail("%s: ledger %+v, want +%d then -%d", orderID, eff.Ledger, points, points)
	}
	if eff.Notifications[0].EventID != paidID || eff.Notifications[1].EventID != refundID {
		fail("%s: notifications %+v, want the payment's before the refund's", orderID, eff.Notifications)
	}
}

// Tutorial row "REFUNDED(v5) 先于 REFUNDING(v4) — 缓存/延迟或按版本拒绝回退".
func reorderRefundBeforePayment(s *session) string {
	const points = 40
	ev := s.synthetic("", 4, "40.00", reorderStock)
	refunded, paid := ev.refunded(), ev.paid()
	check(s.api.Publish(s.ctx, refunded))
	// A parked event keeps its dedup row: each consumer has read it.
	must(s.api.WaitConsumed(s.ctx, s.t.Timeout, refunded.EventID, consumers...))
	s.noEffects(ev.orderID, "a refund before its payment")
	s.stockIs(ev.sku, reorderStock, 0, "a refund before its payment:")

	start := time.Now()
	check(s.api.Publish(s.ctx, paid))
	s.waitEffects(ev.orderID, "RESTOCKED", 2, 2)
	s.converged = time.Since(start)
	s.stockIs(ev.sku, reorderStock, 0, "conserved:")
	s.appliedInOrder(ev.orderID, points, paid.EventID, refunded.EventID)
	return fmt.Sprintf("v5 parked (stock %d/0, ledger 0, notifications 0); after v3: RESTOCKED, stock %d/0, ledger +%d -%d, notifications paid then refunded",
		reorderStock, reorderStock, points, points)
}

// Tutorial row "PAID(v3) 后收到 CREATED(v1) — 忽略旧版本，订单仍为已支付" and
// `test_当旧事件晚到时_订单状态不回退`.
func reorderLateCreated(s *session) string {
	const quantity = 3
	ev := s.synthetic("", quantity, "30.00", reorderStock)
	// The same version re-emitted under a new eventId: not a duplicate for
	// the dedup table, only the version guard stops it.
	paid, created, stale := ev.paid(), ev.created(), ev.paid()
	check(s.api.Publish(s.ctx, paid))
	s.waitEffects(ev.orderID, "DEDUCTED", 1, 1)
	before := s.counts(handled, consumers...)
	start := time.Now()
	check(s.api.Publish(s.ctx, created, stale))
	s.waitGrown(handled, before, 2, "each consumer reads the late v1 and v3")
	s.converged = time.Since(start)
	st, eff := s.stock(ev.sku), s.effects(ev.orderID)
	if !eff.are("DEDUCTED", 1, 1) || st.Deducted != quantity {
		fail("late events moved the state: %s, stock %d/%d; want DEDUCTED, 1, 1, %d deducted", eff, st.Available, st.Deducted, quantity)
	}
	if n := must(s.api.ProcessedEventCount(s.ctx, Inventory, stale.EventID)); n != 1 {
		fail("the stale PAID v3 has %d dedup rows in inventory, want 1 (recorded as IGNORED_STALE_EVENT)", n)
	}
	return fmt.Sprintf("v1 and a stale v3 read by each consumer, no effect: inventory DEDUCTED, stock %d/%d, ledger 1, notifications 1",
		st.Available, st.Deducted)
}

// docs/design.md, Consumers and partitions: one order's events are handled
// one at a time and in order, different orders' in parallel (pkg/messaging
// TestRouterHandlesAnOrderAtATimeAndOrdersInParallel proves the concurrency
// itself). From outside, an order handled out of turn shows as a REFUNDED
// v5 parked for its PAID v3.
func reorderOrdersInParallel(s *session) string {
	const perPartition, points = 2, 10
	n := must(s.api.Partitions(s.ctx))
	stockOf := perPartition * n
	sku := s.seeded("", stockOf)
	var (
		orders []string
		recs   []*kgo.Record
		paid   = map[string]string{}
		refund = map[string]string{}
	)
	for p := range int32(n) {
		for i := range perPartition {
			id := s.sameKeyPartition(s.orderID("-p"+strconv.Itoa(int(p))+"-"+strconv.Itoa(i)+"-"), p, n)
			ev := s.newOrderEvents(id, sku, 1, "10.00")
			v3, v5 := ev.paid(), ev.refunded()
			recs = append(recs, s.record(v3), s.record(v5))
			orders = append(orders, id)
			paid[id], refund[id] = v3.EventID, v5.EventID
		}
	}
	parked := s.counts(outcomes("WAITING_FOR_GAP"), consumers...)
	applied := s.counts(outcomes("APPLIED"), consumers...)
	start := time.Now()
	used := map[int32]bool{}
	for _, r := range must(s.api.Produce(s.ctx, recs...)) {
		used[r.Partition] = true
	}
	for _, id := range orders {
		s.waitEffects(id, "RESTOCKED", 2, 2)
	}
	s.converged = time.Since(start)
	for _, id := range orders {
		s.appliedInOrder(id, points, paid[id], refund[id])
	}
	parked, applied = s.grown(outcomes("WAITING_FOR_GAP"), parked), s.grown(outcomes("APPLIED"), applied)
	for _, c := range consumers {
		if parked[c] != 0 {
			fail("%s parked %v events waiting for a predecessor: an order's REFUNDED v5 was handled before its PAID v3", c, parked[c])
		}
		if applied[c] < float64(2*len(orders)) {
			fail("%s applied %v events, want %d", c, applied[c], 2*len(orders))
		}
	}
	st := s.stockIs(sku, stockOf, 0, "conserved:")
	return fmt.Sprintf("%d orders on %d of %d partitions, %d events at once: all RESTOCKED, ledger + then -, notifications paid then refunded; "+
		"each consumer applied %d, parked 0; stock %d/0",
		len(orders), len(used), n, len(recs), 2*len(orders), st.Available)
}

// Tutorial: the same key must land on the same partition whichever client
// publishes it. The relay publishes with Sarama and pkg/messaging's murmur2
// partitioner; another service, or a learner's script, uses franz-go's
// default (or the Java client's) — they must agree, or one order's events
// from two producers could be read out of order.
func reorderCrossClientPartition(s *session) string {
	const orders = 8
	n := must(s.api.Partitions(s.ctx))
	sku := s.seeded("", orders)
	ids := make([]string, orders)
	recs := make([]*kgo.Record, orders)
	for i := range ids {
		ids[i] = s.orderID("-" + strconv.Itoa(i))
		recs[i] = s.record(s.newOrderEvents(ids[i], sku, 1, "10.00").paid())
	}
	start := time.Now()
	// The session's producer is a plain kgo client: its default partitioner
	// hashes keys with Kafka's murmur2. ProduceSync answers in completion
	// order, not the records' order: the record itself says which order it
	// was.
	used := map[int32]bool{}
	for _, r := range must(s.api.Produce(s.ctx, recs...)) {
		key := string(r.Key)
		if want := must(messaging.KeyPartition(key, int32(n))); r.Partition != want {
			fail("%s: franz-go put it on partition %d, the services' partitioner on %d", key, r.Partition, want)
		}
		used[r.Partition] = true
	}
	for _, id := range ids {
		s.waitEffects(id, "DEDUCTED", 1, 1)
	}
	s.converged = time.Since(start)
	return fmt.Sprintf("%d orders on %d of %d partitions, each where pkg/messaging's murmur2 puts its key; all DEDUCTED, ledger 1, notifications 1",
		orders, len(used), n)
}

// docs/design.md, Version guard and parking: a gap that never fills is
// dead-lettered after PARK_DEADLINE and counted
// (consumer_gap_timeouts_total).
func reorderGapDeadline(s *session) string {
	if s.t.ParkDeadline > MaxParkDeadline {
		check(skip(fmt.Sprintf("PARK_DEADLINE is %s, longer than the %s this drill waits: run the suite and the drill with a short one (e.g. PARK_DEADLINE=10s)",
			s.t.ParkDeadline, MaxParkDeadline)))
	}
	ev := s.synthetic("", 2, "20.00", reorderStock)
	refunded := ev.refunded()
	before := s.counts(gapTimeouts, consumers...)
	start := time.Now()
	check(s.api.Publish(s.ctx, refunded))
	// The sweep runs every PARK_SWEEP_INTERVAL (10 s by default) after the
	// deadline has passed.
	var held time.Duration
	for _, c := range consumers {
		dl := s.waitDeadLetterFor(s.t.Timeout+2*s.t.ParkDeadline, c+" dead-letters the parked "+ev.orderID, c, ev.orderID)
		s.checkMetadata(c, dl, refunded.EventID, "PERMANENT", "WAITING_FOR_GAP", 1)
		// firstFailedAt is when it was parked; both times are the suite's.
		h := dl.DeadLetteredAt.Sub(dl.FirstFailedAt)
		if h < s.t.ParkDeadline {
			fail("%s dead-lettered it %s after parking it, before the %s deadline", c, h.Round(time.Millisecond), s.t.ParkDeadline)
		}
		held = max(held, h)
	}
	s.converged = time.Since(start)
	for c, d := range s.grown(gapTimeouts, before) {
		if d < 1 {
			fail("%s: consumer_gap_timeouts_total +%v, want +1", c, d)
		}
	}
	s.noEffects(ev.orderID, "a refund without its payment")
	st := s.stockIs(ev.sku, reorderStock, 0, "a refund without its payment:")
	return fmt.Sprintf("v5 parked, then dead-lettered by %d consumers after at most %s (PARK_DEADLINE %s): PERMANENT WAITING_FOR_GAP, attempts 1, gap timeouts +1 each; stock %d/0, no effect",
		len(consumers), held.Round(10*time.Millisecond), s.t.ParkDeadline, st.Available)
}
