package e2e_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// checkedOut creates and checks out an order of two SKU-1 at 40.00 and
// waits until the order service has relayed both events, so a fail point
// armed afterwards hits the payment's event and nothing earlier.
func checkedOut(t *testing.T, s *harness.Suite, orderID string) {
	t.Helper()
	s.CreateOrder(harness.Order{ID: orderID, Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: "40.00"}}})
	s.WaitUntil(10*time.Second, "OrderCreated and OrderCheckedOut relayed", func() bool {
		rows := s.OutboxRows("order", orderID)
		return len(rows) == 2 && rows[0].Status == "SENT" && rows[1].Status == "SENT"
	})
}

// each is n for every consumer of OrderPaid.
func each(n int) map[string]int {
	return map[string]int{"inventory": n, "points": n, "notification": n}
}

// effectsOnce checks every side effect of one payment happened exactly
// once, and that deduplication is what kept the copies from applying. It
// first waits until each consumer has finished read[consumer] messages
// since its process started (the order's OrderCreated and OrderCheckedOut,
// then every copy of its OrderPaid), then wants each consumer to have
// recognised dups[consumer] copies as duplicates (in its dedup record and
// its DUPLICATE outcomes) and dead-lettered nothing of the order.
func effectsOnce(t *testing.T, s *harness.Suite, orderID, eventID string, read, dups map[string]int) {
	t.Helper()
	s.WaitSnapshot(orderID, paidSnapshot(), 30*time.Second)
	since := s.WaitRead(30*time.Second, nil, read)
	if st := s.Inventory("SKU-1"); st.Deducted != 2 {
		t.Errorf("stock deducted %d, want 2 (once)", st.Deducted)
	}
	for _, svc := range []string{"inventory", "points", "notification"} {
		if d := s.Dedup(svc, eventID); d.Count != 1 || d.Duplicates != dups[svc] {
			t.Errorf("%s: dedup record of %s %+v, want 1 row and %d duplicates", svc, eventID, d, dups[svc])
		}
		if got := since[svc].Outcomes["DUPLICATE"]; got != float64(dups[svc]) {
			t.Errorf("%s: %v DUPLICATE outcomes, want %d", svc, got, dups[svc])
		}
		if n := s.DeadLetters(svc, orderID); n != 0 {
			t.Errorf("%s dead-lettered %d messages of %s, want none", svc, n, orderID)
		}
	}
	if n := s.PointsLedgerCount(orderID); n != 1 {
		t.Errorf("ledger rows %d, want 1", n)
	}
	if n := s.NotificationCount(orderID); n != 1 {
		t.Errorf("notifications %d, want 1", n)
	}
}

// Tutorial loss window "生产后进程崩溃": the order's transaction committed and
// the process died before the relay published. The row must still be
// PENDING, and the event delivered after the restart.
func TestCrashAfterCommitBeforePublish(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-L1")
	s.Restart("order", map[string]string{"FAILPOINTS": "relay.before-publish=exit"})

	// The callback may or may not be answered before the process dies; the
	// payment service keeps delivering it either way.
	if code, out := s.Pay("O-L1", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	if code := s.WaitExit("order", 15*time.Second); code != 137 {
		t.Fatalf("order exited with %d, want the fail point's 137", code)
	}
	paid := s.OutboxRow("order", "O-L1", "OrderPaid")
	if paid.Status != "PENDING" {
		t.Fatalf("after the crash the OrderPaid row is %s, want PENDING", paid.Status)
	}
	if n := s.TopicCount(paid.EventID); n != 0 {
		t.Fatalf("OrderPaid reached the topic %d times before the restart, want 0", n)
	}

	s.StartService("order", nil)
	s.WaitUntil(20*time.Second, "OrderPaid relayed after the restart", func() bool {
		return s.OutboxRow("order", "O-L1", "OrderPaid").Status == "SENT"
	})
	if n := s.TopicCount(paid.EventID); n != 1 {
		t.Fatalf("OrderPaid is on the topic %d times, want 1", n)
	}
	effectsOnce(t, s, "O-L1", paid.EventID, each(3), each(0))
}

// Tutorial: "当 Relay 发送后未更新状态就崩溃时，允许重发但业务结果不重复".
func TestCrashAfterPublishBeforeMarkingSent(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-L2")
	s.Restart("order", map[string]string{"FAILPOINTS": "relay.after-publish=exit"})

	if code, out := s.Pay("O-L2", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	if code := s.WaitExit("order", 15*time.Second); code != 137 {
		t.Fatalf("order exited with %d, want 137", code)
	}
	paid := s.OutboxRow("order", "O-L2", "OrderPaid")
	if paid.Status != "PENDING" {
		t.Fatalf("row %s after publishing and dying, want PENDING", paid.Status)
	}

	s.StartService("order", nil)
	s.WaitUntil(20*time.Second, "OrderPaid sent again and marked SENT", func() bool {
		return s.OutboxRow("order", "O-L2", "OrderPaid").Status == "SENT"
	})
	if n := s.TopicCount(paid.EventID); n != 2 {
		t.Fatalf("OrderPaid %s is on the topic %d times, want 2 (sent, crashed, sent again)", paid.EventID, n)
	}
	effectsOnce(t, s, "O-L2", paid.EventID, each(2+2), each(1))
}

// Tutorial loss window "Broker 确认丢失": the broker appends the event but the
// producer never sees the acknowledgement. The relay sends the same eventId
// again and the consumers apply it once.
func TestBrokerAcknowledgementLost(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-L3")
	// REQUEST_TIMED_OUT on a produce is answered after the append (kfake's
	// fault semantics): every try of the producer, its own retries included,
	// lands on the log and reports failure.
	fault := s.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: s.Topic, Err: kerr.RequestTimedOut, Count: 4})

	if code, out := s.Pay("O-L3", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitUntil(20*time.Second, "the fault used up", func() bool { return fault.Hits() >= 4 })
	var row harness.OutboxRow
	s.WaitUntil(20*time.Second, "the relay's second attempt succeeds", func() bool {
		row = s.OutboxRow("order", "O-L3", "OrderPaid")
		return row.Status == "SENT"
	})
	if row.Attempts < 2 {
		t.Errorf("outbox row %+v, want SENT after at least 2 attempts", row)
	}
	copies := s.TopicCount(row.EventID)
	if copies < 2 {
		t.Errorf("OrderPaid is on the topic %d times, want the lost-ack copy and the re-send (>= 2)", copies)
	}
	// Every consumer reads every copy (two events before it) and applies one.
	effectsOnce(t, s, "O-L3", row.EventID, each(2+copies), each(copies-1))
}

// Tutorial: "当 Broker 暂时不可用时，PENDING 事件保留并带退避重试" — the broker is
// unreachable for 12 s (the drill's outage, drill.DefaultOutage, is the
// tutorial's 30 s; the backoff here is scaled down with it): the row stays
// PENDING, its attempts grow with exponential backoff and jitter, and the
// chain drains within seconds of the broker's return.
func TestBrokerOutageKeepsRowsPendingWithBackoff(t *testing.T) {
	t.Parallel()
	const backoffMax, outage = 2 * time.Second, 12 * time.Second
	s := harness.Start(t, harness.Options{ServiceEnv: map[string]map[string]string{
		"order": {"OUTBOX_BACKOFF_INITIAL": "250ms", "OUTBOX_BACKOFF_MAX": backoffMax.String()},
	}})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-L4")
	s.StopBroker()
	down := time.Now()

	if code, out := s.Pay("O-L4", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	var row harness.OutboxRow
	var delays []time.Duration // the backoff chosen after each failed attempt
	s.WaitUntil(outage+15*time.Second, "the outage", func() bool {
		for _, r := range s.OutboxRows("order", "O-L4") {
			if r.EventType != "OrderPaid" {
				continue
			}
			if r.Status != "PENDING" {
				t.Fatalf("row %s during the outage, want PENDING", r.Status)
			}
			if r.Attempts > row.Attempts {
				delays = append(delays, time.Until(r.NextAttemptAt))
			}
			row = r
		}
		return time.Since(down) >= outage
	})
	if row.Attempts < 4 {
		t.Fatalf("%d attempts in a %v outage, want the relay to keep trying", row.Attempts, outage)
	}
	for _, d := range delays {
		if d > backoffMax*3/2+time.Second {
			t.Errorf("a backoff of %v exceeds the cap %v plus jitter", d, backoffMax)
		}
	}
	if first, last := delays[0], delays[len(delays)-1]; last <= first {
		t.Errorf("backoff did not grow: first %v, last %v (all %v)", first, last, delays)
	}
	if snap := s.Snapshot("O-L4"); snap.Inventory != "NONE" {
		t.Fatalf("inventory %s while the broker is down, want NONE", snap.Inventory)
	}

	s.StartBroker()
	took := s.WaitSnapshot("O-L4", paidSnapshot(), 30*time.Second)
	t.Logf("%d attempts during the outage, backoffs %v; drained %v after the broker returned", row.Attempts, delays, took)
	s.WaitUntil(20*time.Second, "OrderPaid marked SENT", func() bool {
		return s.OutboxRow("order", "O-L4", "OrderPaid").Status == "SENT"
	})
	copies := s.TopicCount(row.EventID)
	if copies < 1 {
		t.Fatalf("OrderPaid %s is not on the topic", row.EventID)
	}
	effectsOnce(t, s, "O-L4", row.EventID, each(2+copies), each(copies-1))
}

// The same for the callback sink: the order service is down, the payment's
// callback stays PENDING with growing attempts, and is delivered once the
// order service is back.
func TestOrderServiceDownKeepsCallbacksPending(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-L5")
	// The payment service looks the order up before charging, so take the
	// order service away only after that: between the charge and the
	// callback, which the payment's relay holds (every publish fails) until
	// the order service is down. A fail point that exits the payment
	// service there instead raced its answer to the payment.
	s.ArmFailPoint("payment", outbox.FailPointBeforePublish, "error", 0)
	if code, out := s.Pay("O-L5", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitFailPointFired("payment", outbox.FailPointBeforePublish, 1, 10*time.Second)
	s.Stop("order")
	s.ArmFailPoint("payment", outbox.FailPointBeforePublish, "off", 0)

	// Attempts from now on fail because the order service is down (one
	// may still be the fail point's, in flight when it was disarmed).
	held := s.OutboxRows("payment", "O-L5")
	if len(held) != 1 || held[0].Status != "PENDING" {
		t.Fatalf("payment outbox %+v, want the callback held PENDING", held)
	}
	var row harness.OutboxRow
	s.WaitUntil(30*time.Second, "three more failed callback attempts", func() bool {
		rows := s.OutboxRows("payment", "O-L5")
		if len(rows) == 0 {
			return false
		}
		row = rows[0]
		return row.Attempts >= held[0].Attempts+3
	})
	if row.Status != "PENDING" {
		t.Fatalf("callback %s while the order service is down, want PENDING", row.Status)
	}
	s.StartService("order", nil)
	s.WaitSnapshot("O-L5", paidSnapshot(), 60*time.Second)
	// The relay marks the callback SENT once the order service has
	// answered, which may be after the consumers applied what the answer
	// set off.
	s.WaitUntil(20*time.Second, "the callback marked SENT", func() bool {
		rows := s.OutboxRows("payment", "O-L5")
		return len(rows) > 0 && rows[0].Status == "SENT"
	})
	if rows := s.OutboxRows("payment", "O-L5"); len(rows) != 1 || rows[0].Status != "SENT" {
		t.Errorf("payment outbox %+v, want one SENT callback", rows)
	}
}
