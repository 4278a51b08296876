package drill

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Tutorial: "修复消费者后按原 eventId 重放死信" (after fixing the consumer,
// replay the dead letter with its original eventId) and "DLQ 重放前先修复原因，
// 并用原 eventId 保持幂等".
func replayCases() []Case {
	return []Case{
		newCase("replay", "after-fix",
			"dead-lettered payment, cause fixed, replayed with the original eventId: the replay answers APPLIED, applied once; GET /admin/dlq/{id} audits who, when and the outcome",
			false, replayAfterFix),
		newCase("replay", "twice",
			"a second replay of the same dead letter: ALREADY_REPLAYED, nothing changes; both requests audited in order",
			false, replayTwice),
		newCase("replay", "late-refund",
			"a refund's OrderRefunded dead-lettered by notification, a second refund told meanwhile: the replay answers APPLIED (the guard's APPLIED_LATE_FACT), the customer has both refund messages (3 in all), reconciliation finds nothing; before late facts were told the replay was IGNORED_STALE and that refund never told",
			false, replayLateRefund),
	}
}

const replayQuantity = 2

// deadLetteredPayment pays an order while the inventory consumer fails on
// every attempt, waits for the dead letter, then fixes the cause (disarms
// the fail point). It returns the order, its SKU and the dead letter.
func deadLetteredPayment(s *session) (orderID, sku string, dl deadLetter, err error) {
	orderID, sku = s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", "", deadLetter{}, err
	}
	amount, err := s.placeOrder(orderID, sku, replayQuantity, "40.00")
	if err != nil {
		return "", "", deadLetter{}, err
	}
	if err := s.api.ArmFailPoint(s.ctx, Inventory, "inventory.apply", "error", 0); err != nil {
		return "", "", deadLetter{}, err
	}
	// The fix: whatever happens, the consumer is healthy again afterwards.
	defer disarm(s, Inventory, &err)
	if err := s.pay(orderID, amount); err != nil {
		return "", "", deadLetter{}, err
	}
	dl, _, err = s.waitDeadLetter(Inventory, orderID)
	if err != nil {
		return "", "", deadLetter{}, err
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", "", deadLetter{}, err
	}
	if err := checkMetadata(s, Inventory, dl, paid.EventID, "RETRYABLE", s.t.RetryMaxAttempts); err != nil {
		return "", "", deadLetter{}, err
	}
	if err := s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", s.t.RetryMaxAttempts); err != nil {
		return "", "", deadLetter{}, err
	}
	return orderID, sku, dl, nil
}

// replayAndApply replays the dead letter and waits until it has been
// applied once.
func replayAndApply(s *session, orderID, sku string, dl deadLetter) (string, error) {
	start := time.Now()
	res, err := s.api.Replay(s.ctx, Inventory, dl.ID, requester(s))
	if err != nil {
		return "", err
	}
	// The consumer's own verdict: the replay waits for its inbox's outcome.
	if res.Outcome != "APPLIED" || res.EventID != dl.EventID {
		return "", fmt.Errorf("replay answered %s for %s, want APPLIED for the original %s", res.Outcome, res.EventID, dl.EventID)
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	return s.paidOnce(orderID, dl.EventID, sku, seedStock, replayQuantity)
}

func replayAfterFix(s *session) (string, error) {
	orderID, sku, dl, err := deadLetteredPayment(s)
	if err != nil {
		return "", err
	}
	effectsOnce, err := replayAndApply(s, orderID, sku, dl)
	if err != nil {
		return "", err
	}
	after, err := s.api.DeadLetters(s.ctx, Inventory, orderID, "")
	if err != nil {
		return "", err
	}
	if len(after) != 1 || after[0].Status != "REPLAYED" {
		return "", fmt.Errorf("dead letters after the replay %+v, want one marked REPLAYED", after)
	}
	audit, err := checkAudit(s, Inventory, dl, "APPLIED")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("DLQ after %d attempts; fixed; replay %d APPLIED with the original %s; %s; audit: %s",
		dl.Attempts, dl.ID, dl.EventID, effectsOnce, audit), nil
}

func replayTwice(s *session) (string, error) {
	orderID, sku, dl, err := deadLetteredPayment(s)
	if err != nil {
		return "", err
	}
	if _, err := replayAndApply(s, orderID, sku, dl); err != nil {
		return "", fmt.Errorf("first replay: %w", err)
	}
	stockBefore, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	effBefore, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	res, err := s.api.Replay(s.ctx, Inventory, dl.ID, requester(s))
	if err != nil {
		return "", err
	}
	if res.Outcome != "ALREADY_REPLAYED" {
		return "", fmt.Errorf("second replay answered %s, want ALREADY_REPLAYED", res.Outcome)
	}
	stockAfter, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	effAfter, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if stockAfter != stockBefore || !reflect.DeepEqual(effAfter, effBefore) {
		return "", fmt.Errorf("the second replay changed things: stock %+v -> %+v, %s -> %s", stockBefore, stockAfter, effBefore, effAfter)
	}
	if err := s.processedOnce(dl.EventID); err != nil {
		return "", err
	}
	audit, err := checkAudit(s, Inventory, dl, "APPLIED", "ALREADY_REPLAYED")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("first replay APPLIED; second ALREADY_REPLAYED: stock %d/%d, dedup rows, ledger and notifications unchanged; audit: %s",
		stockAfter.Available, stockAfter.Deducted, audit), nil
}

// requester is who the case's replays are audited as: unique to the run
// and case, so the audit row is provably this drill's.
func requester(s *session) string { return "drill-" + s.t.RunID + "-" + s.slug }

// checkAudit reads service's dead letter back (GET /admin/dlq/{id}) and checks its
// status is REPLAYED and its audit holds one row per replay request, in
// order, with the drill as requester, a time no earlier than the dead
// letter and the outcome answered. It returns the audit as a line.
func checkAudit(s *session, service string, dl deadLetter, outcomes ...string) (string, error) {
	rec, audit, err := s.api.Inspect(s.ctx, service, dl.ID)
	if err != nil {
		return "", err
	}
	if rec.Status != "REPLAYED" || rec.EventID != dl.EventID {
		return "", fmt.Errorf("dead letter %d reads %s for %s, want REPLAYED for %s", dl.ID, rec.Status, rec.EventID, dl.EventID)
	}
	if len(audit) != len(outcomes) {
		return "", fmt.Errorf("dead letter %d has %d audit rows %+v, want %d (one per replay request)", dl.ID, len(audit), audit, len(outcomes))
	}
	var rows []string
	for i, a := range audit {
		at, err := time.Parse(time.RFC3339Nano, a.RequestedAt)
		if err != nil {
			return "", fmt.Errorf("audit row %d: requestedAt %q: %w", i+1, a.RequestedAt, err)
		}
		// Both times come from the suite's database clock; the dead
		// letter's is rounded to the millisecond in the audit.
		if a.RequestedBy != requester(s) || a.Outcome != outcomes[i] || at.Before(dl.DeadLetteredAt.Truncate(time.Millisecond)) {
			return "", fmt.Errorf("audit row %d: %s at %s, %s; want %s, after the dead letter (%s), %s",
				i+1, a.RequestedBy, a.RequestedAt, a.Outcome, requester(s), dl.DeadLetteredAt.UTC().Format(time.RFC3339Nano), outcomes[i])
		}
		rows = append(rows, a.Outcome+" by "+a.RequestedBy+" at "+a.RequestedAt)
	}
	return strings.Join(rows, ", "), nil
}
