package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// Tutorial "区分可恢复失败、毒消息与死信" and "修复后按原 eventId 重放死信": a
// retryable failure that never clears is dead-lettered after exactly the
// retry bound, with the metadata the tutorial lists; after the fix, a replay
// applies it once and is audited; a second replay changes nothing.
func TestDeadLetterAndReplay(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{Env: map[string]string{"RETRY_MAX_ATTEMPTS": "4"}})
	s.SetStock("SKU-1", 100)
	s.FailConsumer("inventory", 1000)

	s.CreateOrder(harness.Order{ID: "O-DLQ", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: "40.00"}}})
	if code, out := s.Pay("O-DLQ", "80.00", "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-DLQ", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "NONE",
		PointsLedger: 1, Notifications: 1, DLQ: 1}, 30*time.Second)

	list := s.JSON("inventory", "GET", "/admin/dlq?aggregateId=O-DLQ", nil, 200)
	items := list["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("inventory DLQ holds %d records for the order, want 1", len(items))
	}
	rec := items[0].(map[string]any)
	paid := s.OutboxRow("order", "O-DLQ", "OrderPaid")
	for field, want := range map[string]any{
		"originalTopic": s.Topic, "eventId": paid.EventID, "errorClass": "RETRYABLE",
		"attempts": float64(4), "consumer": "inventory-service", "status": "DEAD",
	} {
		if rec[field] != want {
			t.Errorf("DLQ record %s = %v, want %v", field, rec[field], want)
		}
	}
	if !strings.Contains(fmt.Sprint(rec["failureReason"]), "injected failure") || rec["firstFailedAt"] == "" {
		t.Errorf("DLQ record lacks its reason or first failure time: %v", rec)
	}
	if st := s.Inventory("SKU-1"); st.Deducted != 0 {
		t.Fatalf("a dead-lettered event deducted %d", st.Deducted)
	}

	// The fix, then the replay.
	s.ArmFailPoint("inventory", "inventory.apply", "off", 0)
	s.FailPointFired("inventory", "inventory.apply", 4)
	id := int(rec["id"].(float64))
	replay, err := s.API().Replay(context.Background(), "inventory", int64(id), "e2e")
	// The replay answers what the inventory consumer did with the event.
	if err != nil || replay.Outcome != "APPLIED" || replay.EventID != paid.EventID {
		t.Fatalf("replay answered %+v, %v", replay, err)
	}
	s.WaitSnapshot("O-DLQ", paidSnapshot(), 30*time.Second)
	if st := s.Inventory("SKU-1"); st.Deducted != 2 {
		t.Errorf("deducted %d after the replay, want 2", st.Deducted)
	}
	for _, svc := range consumers {
		if n := s.ProcessedEventCount(svc, paid.EventID); n != 1 {
			t.Errorf("%s processed the event %d times, want 1 (the replay reached every consumer, the others deduplicated it)", svc, n)
		}
	}

	again, err := s.API().Replay(context.Background(), "inventory", int64(id), "e2e")
	if err != nil || again.Outcome != "ALREADY_REPLAYED" {
		t.Fatalf("second replay answered %+v, %v, want ALREADY_REPLAYED", again, err)
	}
	inspected := s.JSON("inventory", "GET", fmt.Sprintf("/admin/dlq/%d", id), nil, 200)
	audit := inspected["replays"].([]any)
	if inspected["status"] != "REPLAYED" || len(audit) != 2 ||
		audit[0].(map[string]any)["outcome"] != "APPLIED" || audit[1].(map[string]any)["outcome"] != "ALREADY_REPLAYED" ||
		audit[0].(map[string]any)["requestedBy"] != "e2e" || audit[0].(map[string]any)["requestedAt"] == "" {
		t.Errorf("inspected record %v, want status REPLAYED and two audited replays (who, when, outcome APPLIED then ALREADY_REPLAYED)", inspected)
	}
	if n := s.TopicCount(paid.EventID); n != 2 {
		t.Errorf("the event is on the topic %d times, want 2 (original and one replay)", n)
	}
	if st := s.Inventory("SKU-1"); st.Deducted != 2 {
		t.Errorf("a second replay changed the stock to %d deducted", st.Deducted)
	}
}
