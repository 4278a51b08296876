package main

import (
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// With PARK_DEADLINE=1s, an OrderRefunded whose OrderPaid never comes is
// dead-lettered a second after it was parked, as PERMANENT WAITING_FOR_GAP,
// and counted; one whose OrderPaid follows in time is applied instead.
func TestParkedEventPastTheDeadlineIsDeadLettered(t *testing.T) {
	s := &instance{Service: servicetest.Start(t, run, map[string]string{
		"PARK_DEADLINE":       "1s",
		"PARK_SWEEP_INTERVAL": "50ms",
	})}
	s.setStock("GAP-1", 10)

	lost := newEvent(t, event.OrderRefunded, "O-gap-lost", 5, refundedData(item("GAP-1", 2)))
	s.Publish(lost)
	s.Publish(
		newEvent(t, event.OrderRefunded, "O-gap-filled", 5, refundedData(item("GAP-1", 1))),
		newEvent(t, event.OrderPaid, "O-gap-filled", 3, paidData(item("GAP-1", 1))),
	)

	s.WaitFor("the lost refund dead-lettered", func() bool { return s.DeadLetters("O-gap-lost").Count == 1 })
	rec := s.DeadLetters("O-gap-lost").Items[0]
	if rec.EventID != lost.EventID || rec.ErrorClass != "PERMANENT" || rec.Attempts != 1 ||
		rec.Consumer != "inventory-service" || rec.OriginalTopic != s.Topic ||
		!strings.HasPrefix(rec.FailureReason, "WAITING_FOR_GAP: ") || !strings.Contains(rec.FailureReason, "DEDUCTED") {
		t.Errorf("dead letter %+v, want PERMANENT WAITING_FOR_GAP naming the missing DEDUCTED predecessor", rec)
	}
	if got := s.status("O-gap-lost"); got != "NONE" {
		t.Errorf("lost refund's order is %s, want NONE (nothing applied)", got)
	}
	if got := s.status("O-gap-filled"); got != "RESTOCKED" {
		t.Errorf("filled gap's order is %s, want RESTOCKED", got)
	}
	if n := s.DeadLetters("O-gap-filled").Count; n != 0 {
		t.Errorf("%d dead letters for the gap that filled in time, want 0", n)
	}
	if st := s.stock("GAP-1"); st.Available != 10 || st.Deducted != 0 {
		t.Errorf("stock %+v, want 10 available and 0 deducted (the filled order deducted and restocked 1)", st)
	}
	s.WaitFor("the parked gauge back at 0", func() bool {
		return s.Counter("consumer_parked_events", `consumer="inventory-service"`) == 0
	})
	if got := s.Counter("consumer_gap_timeouts_total", `consumer="inventory-service"`); got != 1 {
		t.Errorf("consumer_gap_timeouts_total = %v, want 1", got)
	}
	if got := s.Counter("consumer_event_outcomes_total", `outcome="WAITING_FOR_GAP"`); got != 2 {
		t.Errorf("WAITING_FOR_GAP outcomes = %v, want 2 (both refunds were parked first)", got)
	}

	// The fix: the missing payment arrives, and the dead-lettered refund is
	// replayed. The sweep forgot its dedup row, so the replay applies it.
	if n := s.ProcessedCount(lost.EventID); n != 0 {
		t.Fatalf("a dead-lettered event still counts as processed (%d), so its replay would be ignored", n)
	}
	s.Publish(newEvent(t, event.OrderPaid, "O-gap-lost", 3, paidData(item("GAP-1", 2))))
	s.WaitFor("the late payment applied", func() bool { return s.status("O-gap-lost") == "DEDUCTED" })
	if res := s.Replay(rec.ID); res.Outcome != "APPLIED" {
		t.Fatalf("replay %+v", res)
	}
	s.WaitFor("the replayed refund applied", func() bool { return s.status("O-gap-lost") == "RESTOCKED" })
	if st := s.stock("GAP-1"); st.Available != 10 || st.Deducted != 0 {
		t.Errorf("stock %+v after the replayed refund, want 10 available and 0 deducted", st)
	}
	if n := s.ProcessedCount(lost.EventID); n != 1 {
		t.Errorf("replayed refund processed %d times, want 1", n)
	}
}
