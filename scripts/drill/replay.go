package drill

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

const replayQuantity = 2

// deadLetteredPayment pays an order while the inventory consumer fails on
// every attempt, waits for the dead letter, then fixes the cause (disarms
// the fail point). It returns the order and the dead letter.
func (s *session) deadLetteredPayment() (drillOrder, deadLetter) {
	o := s.placed("", replayQuantity, "40.00", seedStock)
	fix := s.arm(Inventory, "inventory.apply", "error", 0)
	s.pay(o)
	dl := s.waitDeadLetter(Inventory, o.id)
	s.checkMetadata(Inventory, dl, s.orderEvent(o.id, "OrderPaid").EventID, "RETRYABLE", "", s.t.RetryMaxAttempts)
	check(s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", s.t.RetryMaxAttempts))
	fix()
	return o, dl
}

// replay replays service's dead letter as the case's requester and checks
// the consumer's own verdict: the replay waits for its inbox's outcome.
func (s *session) replay(service string, dl deadLetter, outcome, what string) {
	res := must(s.api.Replay(s.ctx, service, dl.ID, requester(s)))
	if res.Outcome != outcome || res.EventID != dl.EventID {
		fail("%s answered %s for %s, want %s for the original %s", what, res.Outcome, res.EventID, outcome, dl.EventID)
	}
}

// replayAndApply replays the dead letter and waits until it has been
// applied once.
func (s *session) replayAndApply(o drillOrder, dl deadLetter) string {
	start := time.Now()
	s.replay(Inventory, dl, "APPLIED", "replay")
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	return s.paidOnce(o, dl.EventID)
}

func replayAfterFix(s *session) string {
	o, dl := s.deadLetteredPayment()
	effectsOnce := s.replayAndApply(o, dl)
	if after := must(s.api.DeadLetters(s.ctx, Inventory, o.id, "")); len(after) != 1 || after[0].Status != "REPLAYED" {
		fail("dead letters after the replay %+v, want one marked REPLAYED", after)
	}
	return fmt.Sprintf("DLQ after %d attempts; fixed; replay %d APPLIED with the original %s; %s; audit: %s",
		dl.Attempts, dl.ID, dl.EventID, effectsOnce, s.checkAudit(Inventory, dl, "APPLIED"))
}

func replayTwice(s *session) string {
	o, dl := s.deadLetteredPayment()
	s.replayAndApply(o, dl)
	stockBefore, effBefore := s.stock(o.sku), s.effects(o.id)
	s.replay(Inventory, dl, "ALREADY_REPLAYED", "second replay")
	stockAfter, effAfter := s.stock(o.sku), s.effects(o.id)
	if stockAfter != stockBefore || !reflect.DeepEqual(effAfter, effBefore) {
		fail("the second replay changed things: stock %+v -> %+v, %s -> %s", stockBefore, stockAfter, effBefore, effAfter)
	}
	s.processedOnce(dl.EventID)
	return fmt.Sprintf("first replay APPLIED; second ALREADY_REPLAYED: stock %d/%d, dedup rows, ledger and notifications unchanged; audit: %s",
		stockAfter.Available, stockAfter.Deducted, s.checkAudit(Inventory, dl, "APPLIED", "ALREADY_REPLAYED"))
}

// requester is who the case's replays are audited as: unique to the run
// and case, so the audit row is provably this drill's.
func requester(s *session) string { return "drill-" + s.t.RunID + "-" + s.slug }

// checkAudit reads service's dead letter back (GET /admin/dlq/{id}) and checks its
// status is REPLAYED and its audit holds one row per replay request, in
// order, with the drill as requester, a time no earlier than the dead
// letter and the outcome answered. It returns the audit as a line.
func (s *session) checkAudit(service string, dl deadLetter, outcomes ...string) string {
	rec, audit := must2(s.api.Inspect(s.ctx, service, dl.ID))
	if rec.Status != "REPLAYED" || rec.EventID != dl.EventID {
		fail("dead letter %d reads %s for %s, want REPLAYED for %s", dl.ID, rec.Status, rec.EventID, dl.EventID)
	}
	if len(audit) != len(outcomes) {
		fail("dead letter %d has %d audit rows %+v, want %d (one per replay request)", dl.ID, len(audit), audit, len(outcomes))
	}
	var rows []string
	for i, a := range audit {
		at, err := time.Parse(time.RFC3339Nano, a.RequestedAt)
		checkf(err, "audit row %d: requestedAt %q", i+1, a.RequestedAt)
		// Both times come from the suite's database clock; the dead
		// letter's is rounded to the millisecond in the audit.
		if a.RequestedBy != requester(s) || a.Outcome != outcomes[i] || at.Before(dl.DeadLetteredAt.Truncate(time.Millisecond)) {
			fail("audit row %d: %s at %s, %s; want %s, after the dead letter (%s), %s",
				i+1, a.RequestedBy, a.RequestedAt, a.Outcome, requester(s), dl.DeadLetteredAt.UTC().Format(time.RFC3339Nano), outcomes[i])
		}
		rows = append(rows, a.Outcome+" by "+a.RequestedBy+" at "+a.RequestedAt)
	}
	return strings.Join(rows, ", ")
}
