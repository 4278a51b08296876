package drill

import (
	"fmt"
	"time"
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
	}
}

const reorderStock = 10

// Tutorial row "REFUNDED(v5) 先于 REFUNDING(v4) — 缓存/延迟或按版本拒绝回退".
func reorderRefundBeforePayment(s *session) (string, error) {
	const quantity, amount, points = 4, "40.00", 40
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.seedStock(sku, reorderStock); err != nil {
		return "", err
	}
	ev, err := newOrderEvents(orderID, sku, quantity, amount)
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

	if err := s.publish(refunded); err != nil {
		return "", err
	}
	// A parked event keeps its dedup row: each consumer has read it.
	if _, err := s.waitUntil("REFUNDED v5 read by each consumer", func() (bool, error) {
		for _, c := range consumers {
			if n, err := s.processed(c, refunded.EventID); err != nil || n != 1 {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return "", err
	}
	st, err := s.stock(sku)
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
	if err := s.publish(paid); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "RESTOCKED", 2, 2); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	if st, err = s.stock(sku); err != nil {
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
	if err := s.seedStock(sku, reorderStock); err != nil {
		return "", err
	}
	ev, err := newOrderEvents(orderID, sku, quantity, "30.00")
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
	if err := s.publish(paid); err != nil {
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
	if err := s.publish(created, stale); err != nil {
		return "", err
	}
	if _, err := s.waitHandled(before, 2); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	st, err := s.stock(sku)
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
	if n, err := s.processed(Inventory, stale.EventID); err != nil || n != 1 {
		return "", fmt.Errorf("the stale PAID v3 has %d dedup rows in inventory, want 1 (recorded as IGNORED_STALE_EVENT): %v", n, err)
	}
	return fmt.Sprintf("v1 and a stale v3 read by each consumer, no effect: inventory DEDUCTED, stock %d/%d, ledger 1, notifications 1",
		st.Available, st.Deducted), nil
}
