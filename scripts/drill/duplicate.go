package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Tutorial: "主动制造重复，验证消费者幂等" (provoke duplicates, prove the
// consumer idempotent) — `test_当支付事件重复投递时_库存只扣减一次`.
func duplicateCases() []Case {
	return []Case{
		newCase("duplicate", "twice",
			"the same OrderPaid delivered twice: read twice, applied once (stock, dedup row, ledger, notification)",
			false, duplicateTwice),
		newCase("duplicate", "ten-producers",
			"the same OrderPaid from ten producers at once: read ten times, applied once",
			false, duplicateTenProducers),
		newCase("duplicate", "signed-callback",
			"the payment callback delivered 12 times (10 at once): one PAID v3, one OrderPaid, effects once; a forged and a stale one 401",
			false, duplicateCallback),
		newCase("duplicate", "retried-refund",
			"a refund of 30.00 and a unit sent twice with one Idempotency-Key: one refund (30.00, one unit back), the retry answered again (Idempotent-Replayed, same refundId); sent twice WITHOUT a key: two refunds (60.00, both units back) — a client retrying without a key is refunded twice; both orders converge",
			false, duplicateRetriedRefund),
	}
}

const seedStock = 100

func duplicateTwice(s *session) (string, error) {
	return publishCopies(s, 2, 2, "80.00", func(rec func() error) error {
		for range 2 {
			if err := rec(); err != nil {
				return err
			}
		}
		return nil
	})
}

func duplicateTenProducers(s *session) (string, error) {
	return publishCopies(s, 10, 3, "120.00", func(rec func() error) error {
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = rec()
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	})
}

// publishCopies publishes copies of one OrderPaid through send, which calls
// its argument once per copy (each call its own Kafka producer), and checks
// every consumer read them all and applied one.
func publishCopies(s *session, copies, quantity int, amount string, send func(publishOne func() error) error) (string, error) {
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, amount)
	if err != nil {
		return "", err
	}
	paid, err := ev.paid()
	if err != nil {
		return "", err
	}
	rec, err := suiteapi.Record(s.t.Topic, paid)
	if err != nil {
		return "", err
	}
	before, err := s.handledNow()
	if err != nil {
		return "", err
	}
	start := time.Now()
	err = send(func() error {
		// A producer of its own, as separate services re-sending would be.
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.t.Brokers...), kgo.ProducerLinger(0))
		if err != nil {
			return err
		}
		defer cl.Close()
		own := *rec
		return cl.ProduceSync(s.ctx, &own).FirstErr()
	})
	if err != nil {
		return "", fmt.Errorf("publish: %w", err)
	}
	if _, err := s.waitHandled(before, copies); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	seen, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, quantity)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d copies read by each consumer; %s", copies, seen), nil
}

// callbackAnswer is the order service's answer to a callback.
type callbackAnswer struct {
	status int
	result commandResult
}

// sendCallback posts a payment callback with the given signature headers
// (event.CallbackHeaders).
func (s *session) sendCallback(body []byte, signature map[string]string) (callbackAnswer, error) {
	header := http.Header{}
	for k, v := range signature {
		header.Set(k, v)
	}
	code, raw, err := s.api.Raw(s.ctx, Order, "POST", "/payments/callback", header, body)
	if err != nil {
		return callbackAnswer{}, err
	}
	a := callbackAnswer{status: code}
	_ = json.Unmarshal(raw, &a.result)
	return a, nil
}

func duplicateCallback(s *session) (string, error) {
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, 1, "40.00")
	if err != nil {
		return "", err
	}
	// The drill plays the payment service: the payment it reports was
	// never taken, so the order is the case's own to remove.
	s.planted(orderID)
	body, err := json.Marshal(map[string]string{"callbackId": "CB-" + orderID, "type": "PAYMENT_SUCCEEDED", "orderId": orderID,
		"paymentId": "P-" + orderID, "amount": amount, "currency": "CNY"})
	if err != nil {
		return "", err
	}
	forged, err := s.sendCallback(body, event.CallbackHeaders([]byte("not-the-secret"), time.Now(), body))
	if err != nil {
		return "", err
	}
	if forged.status != http.StatusUnauthorized {
		return "", fmt.Errorf("a callback signed with the wrong secret answered %d, want 401", forged.status)
	}
	// Correctly signed, but long ago: a captured callback replayed after
	// the window.
	stale, err := s.sendCallback(body, event.CallbackHeaders([]byte(s.t.CallbackSecret), time.Now().Add(-time.Hour), body))
	if err != nil {
		return "", err
	}
	if stale.status != http.StatusUnauthorized || stale.result.BusinessCode != "SIGNATURE_EXPIRED" {
		return "", fmt.Errorf("a callback signed an hour ago answered %d %s, want 401 SIGNATURE_EXPIRED", stale.status, stale.result.BusinessCode)
	}
	if o, err := s.api.Order(s.ctx, orderID); err != nil || o.Status != "PENDING_PAYMENT" {
		return "", errors.Join(err, fmt.Errorf("after a forged and a stale callback the order is %s, want PENDING_PAYMENT", o.Status))
	}

	// Every copy is the same request, timestamp included: a replay inside
	// the window, which the callbackId deduplicates.
	signature := event.CallbackHeaders([]byte(s.t.CallbackSecret), time.Now(), body)
	answers := make([]callbackAnswer, 12)
	errs := make([]error, 12)
	start := time.Now()
	for i := range 2 {
		answers[i], errs[i] = s.sendCallback(body, signature)
	}
	var wg sync.WaitGroup
	for i := 2; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = s.sendCallback(body, signature)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	for i, a := range answers {
		if a.status != http.StatusOK || a.result.BusinessCode != "SUCCESS" {
			return "", fmt.Errorf("callback copy %d answered %d %s (is CALLBACK_SECRET the suite's?)", i+1, a.status, a.result.BusinessCode)
		}
	}
	o, err := s.api.Order(s.ctx, orderID)
	if err != nil {
		return "", err
	}
	if o.Status != "PAID" || o.Version != 3 {
		return "", fmt.Errorf("order %s v%d after 12 callbacks, want PAID v3", o.Status, o.Version)
	}
	paid, err := s.orderEvent(orderID, "OrderPaid")
	if err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	seen, err := s.paidOnce(orderID, paid.EventID, sku, seedStock, 1)
	if err != nil {
		return "", err
	}
	return "forged and stale copies 401; 12 signed copies all SUCCESS; order PAID v3 with 1 OrderPaid; " + seen, nil
}
