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
)

const seedStock = 100

// publishCopies publishes copies of one OrderPaid of quantity × amount,
// each from a Kafka producer of its own (as separate services re-sending
// would be), the first serial one after the other and the rest at once
// (sendCopies), and checks every consumer read them all and applied one.
func publishCopies(copies, serial, quantity int, amount string) body {
	return func(s *session) string {
		o := drillOrder{id: s.orderID(""), sku: s.seeded("", seedStock), quantity: quantity, stock: seedStock}
		paid := s.newOrderEvents(o.id, o.sku, quantity, amount).paid()
		rec := s.record(paid)
		before := s.counts(handled, consumers...)
		start := time.Now()
		checkf(sendCopies(copies, serial, func(int) error {
			cl, err := kgo.NewClient(kgo.SeedBrokers(s.t.Brokers...), kgo.ProducerLinger(0))
			if err != nil {
				return err
			}
			defer cl.Close()
			own := *rec
			return cl.ProduceSync(s.ctx, &own).FirstErr()
		}), "publish")
		s.waitGrown(handled, before, copies, fmt.Sprintf("each consumer reads the %d copies", copies))
		s.waitEffects(o.id, "DEDUCTED", 1, 1)
		s.converged = time.Since(start)
		return fmt.Sprintf("%d copies read by each consumer; %s", copies, s.paidOnce(o, paid.EventID))
	}
}

// sendCopies calls send for copies 0 … n-1: the first serial ones one
// after the other, then all the others at once.
func sendCopies(n, serial int, send func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		if i < serial {
			errs[i] = send(i)
			continue
		}
		wg.Go(func() { errs[i] = send(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// callbackAnswer is the order service's answer to a callback.
type callbackAnswer struct {
	status int
	result commandResult
}

// sendCallback posts a payment callback with the given signature headers
// (event.CallbackHeaders) and returns the answer, whatever its status.
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

func duplicateCallback(s *session) string {
	o := s.placed("", 1, "40.00", seedStock)
	// The drill plays the payment service: the payment it reports was
	// never taken, so the order is the case's own to remove.
	s.plants.add(o.id)
	body := must(json.Marshal(map[string]string{"callbackId": "CB-" + o.id, "type": "PAYMENT_SUCCEEDED", "orderId": o.id,
		"paymentId": "P-" + o.id, "amount": o.amount, "currency": "CNY"}))
	forged := must(s.sendCallback(body, event.CallbackHeaders([]byte("not-the-secret"), time.Now(), body)))
	if forged.status != http.StatusUnauthorized {
		fail("a callback signed with the wrong secret answered %d, want 401", forged.status)
	}
	// Correctly signed, but long ago: a captured callback replayed after
	// the window.
	stale := must(s.sendCallback(body, event.CallbackHeaders([]byte(s.t.CallbackSecret), time.Now().Add(-time.Hour), body)))
	if stale.status != http.StatusUnauthorized || stale.result.BusinessCode != "SIGNATURE_EXPIRED" {
		fail("a callback signed an hour ago answered %d %s, want 401 SIGNATURE_EXPIRED", stale.status, stale.result.BusinessCode)
	}
	if v := s.order(o.id); v.Status != "PENDING_PAYMENT" {
		fail("after a forged and a stale callback the order is %s, want PENDING_PAYMENT", v.Status)
	}

	// Every copy is the same request, timestamp included: a replay inside
	// the window, which the callbackId deduplicates. Two one after the
	// other, then ten at once.
	signature := event.CallbackHeaders([]byte(s.t.CallbackSecret), time.Now(), body)
	answers := make([]callbackAnswer, 12)
	start := time.Now()
	check(sendCopies(len(answers), 2, func(i int) (err error) {
		answers[i], err = s.sendCallback(body, signature)
		return err
	}))
	for i, a := range answers {
		if a.status != http.StatusOK || a.result.BusinessCode != "SUCCESS" {
			fail("callback copy %d answered %d %s (is CALLBACK_SECRET the suite's?)", i+1, a.status, a.result.BusinessCode)
		}
	}
	s.orderIs(o.id, "PAID", 3, "after 12 callbacks")
	paid := s.orderEvent(o.id, "OrderPaid")
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	s.converged = time.Since(start)
	return "forged and stale copies 401; 12 signed copies all SUCCESS; order PAID v3 with 1 OrderPaid; " + s.paidOnce(o, paid.EventID)
}
