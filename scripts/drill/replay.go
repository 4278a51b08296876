package drill

import (
	"fmt"
	"reflect"
	"time"
)

// Tutorial: "修复消费者后按原 eventId 重放死信" (after fixing the consumer,
// replay the dead letter with its original eventId) and "DLQ 重放前先修复原因，
// 并用原 eventId 保持幂等".
func replayCases() []Case {
	return []Case{
		newCase("replay", "after-fix",
			"dead-lettered payment, cause fixed, replayed: REPLAYED with the original eventId, applied once",
			false, replayAfterFix),
		newCase("replay", "twice",
			"a second replay of the same dead letter: ALREADY_REPLAYED, nothing changes",
			false, replayTwice),
	}
}

const replayQuantity = 2

// deadLetteredPayment pays an order while the inventory consumer fails on
// every attempt, waits for the dead letter, then fixes the cause (disarms
// the fail point). It returns the order, its SKU and the dead letter.
func deadLetteredPayment(s *session) (orderID, sku string, dl deadLetter, err error) {
	orderID, sku = s.orderID(""), s.sku("")
	if err := s.seedStock(sku, seedStock); err != nil {
		return "", "", deadLetter{}, err
	}
	amount, err := s.placeOrder(orderID, sku, replayQuantity, "40.00")
	if err != nil {
		return "", "", deadLetter{}, err
	}
	if err := s.armFailPoint(Inventory, "inventory.apply", "error", 0); err != nil {
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
	return orderID, sku, dl, nil
}

// replayAndApply replays the dead letter and waits until it has been
// applied once.
func replayAndApply(s *session, orderID, sku string, dl deadLetter) (string, error) {
	start := time.Now()
	res, err := s.replay(Inventory, dl.ID)
	if err != nil {
		return "", err
	}
	if res.Outcome != "REPLAYED" || res.EventID != dl.EventID {
		return "", fmt.Errorf("replay answered %s for %s, want REPLAYED for the original %s", res.Outcome, res.EventID, dl.EventID)
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
	after, err := s.deadLetters(Inventory, orderID)
	if err != nil {
		return "", err
	}
	if len(after) != 1 || after[0].Status != "REPLAYED" {
		return "", fmt.Errorf("dead letters after the replay %+v, want one marked REPLAYED", after)
	}
	return fmt.Sprintf("DLQ after %d attempts; fixed; replay %d REPLAYED with the original %s; %s",
		dl.Attempts, dl.ID, dl.EventID, effectsOnce), nil
}

func replayTwice(s *session) (string, error) {
	orderID, sku, dl, err := deadLetteredPayment(s)
	if err != nil {
		return "", err
	}
	if _, err := replayAndApply(s, orderID, sku, dl); err != nil {
		return "", fmt.Errorf("first replay: %w", err)
	}
	stockBefore, err := s.stock(sku)
	if err != nil {
		return "", err
	}
	effBefore, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	res, err := s.replay(Inventory, dl.ID)
	if err != nil {
		return "", err
	}
	if res.Outcome != "ALREADY_REPLAYED" {
		return "", fmt.Errorf("second replay answered %s, want ALREADY_REPLAYED", res.Outcome)
	}
	stockAfter, err := s.stock(sku)
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
	return fmt.Sprintf("first replay REPLAYED and applied; second ALREADY_REPLAYED: stock %d/%d, dedup rows, ledger and notifications unchanged",
		stockAfter.Available, stockAfter.Deducted), nil
}
