package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// Tutorial consumer window "消费者提交副作用后、提交 offset 前崩溃": inventory
// commits the deduction and dies before the message is acknowledged, so its
// offset is never committed. After the restart the same OrderPaid is
// delivered again, recognised as a duplicate, and every effect stays once.
func TestConsumerCrashAfterCommitBeforeAck(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-1", 100)
	checkedOut(t, s, "O-C1")
	// The fail point fires after every handled message: inventory must have
	// handled OrderCreated and OrderCheckedOut (their offsets are committed by
	// the graceful stop of the restart), so the point hits OrderPaid.
	s.WaitUntil(20*time.Second, "inventory read OrderCreated and OrderCheckedOut", func() bool {
		return s.Metric("inventory", "consumer_messages_total", map[string]string{"outcome": "ok"}) >= 2
	})
	s.Restart("inventory", map[string]string{"FAILPOINTS": consumer.FailPointAfterCommit + "=exit"})

	if code, out := s.Pay("O-C1", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	if code := s.WaitExit("inventory", 30*time.Second); code != 137 {
		t.Fatalf("inventory exited with %d, want the fail point's 137", code)
	}
	paid := s.OutboxRow("order", "O-C1", "OrderPaid")

	// The side effect and its dedup row committed before the crash.
	ctx := context.Background()
	db := s.DB("inventory")
	var deducted, claimed int
	if err := db.GetContext(ctx, &deducted, `SELECT deducted FROM stock WHERE sku = 'SKU-1'`); err != nil {
		t.Fatal(err)
	}
	if err := db.GetContext(ctx, &claimed, `SELECT count(*) FROM processed_events WHERE event_id = $1`, paid.EventID); err != nil {
		t.Fatal(err)
	}
	if deducted != 2 || claimed != 1 {
		t.Fatalf("after the crash: %d deducted and %d dedup rows, want the committed effect (2 and 1)", deducted, claimed)
	}

	s.StartService("inventory", nil)
	// The restarted process reads one message, the OrderPaid whose offset
	// the crash left uncommitted, and must recognise it as a duplicate;
	// points and notification read the order's three events once.
	effectsOnce(t, s, "O-C1", paid.EventID,
		map[string]int{"inventory": 1, "points": 3, "notification": 3},
		map[string]int{"inventory": 1, "points": 0, "notification": 0})
	if n := s.Metric("inventory", "consumer_event_outcomes_total", map[string]string{"outcome": "APPLIED"}); n != 0 {
		t.Errorf("restarted inventory applied %v events, want 0", n)
	}
}
