package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Tutorial: "区分可恢复失败、毒消息与死信" (tell recoverable failures, poison
// messages and dead letters apart): invalid input goes to the DLQ at once,
// a retryable failure after the retry bound, and neither holds its
// partition up for longer than that bound.
func poisonCases() []Case {
	return []Case{
		newCase("poison", "invalid-json",
			"invalid JSON: dead-lettered at once (PERMANENT, attempts 1) by every consumer; the next order on its partition converges",
			false, poisonInvalidJSON),
		newCase("poison", "schema-violation",
			"OrderPaid without its paymentId: dead-lettered at once (PERMANENT SCHEMA_VIOLATION, attempts 1, retries +0) by every consumer; the next order on its partition converges",
			false, poisonSchemaViolation),
		newCase("poison", "unknown-version",
			"OrderPaid with eventVersion 99: dead-lettered at once (PERMANENT UNKNOWN_EVENT_VERSION, attempts 1, retries +0) by every consumer; the next order on its partition converges",
			false, poisonUnknownVersion),
		newCase("poison", "insufficient-stock",
			"a payment for more than the stock: inventory records REJECTED (stock untouched) with no retry and no dead letter",
			false, poisonInsufficientStock),
		newCase("poison", "refund-above-payment",
			"a refund above what was paid: payment rejects it with no retry and no dead letter; the order is back to PAID (v5, OrderRefundRejected), stock untouched",
			false, poisonRefundAbovePayment),
		newCase("poison", "retries-exhausted",
			"inventory fails past the bound: DLQ after exactly RETRY_MAX_ATTEMPTS with the metadata; the next order on its partition converges",
			false, poisonRetriesExhausted),
	}
}

// disarm turns a consumer's apply fail point off when a case ends, however
// it ends, so a failed case cannot fail the next ones.
func disarm(s *session, service string, err *error) {
	if derr := s.api.ArmFailPoint(s.ctx, service, service+".apply", "off", 0); derr != nil {
		*err = errors.Join(*err, fmt.Errorf("disarm %s.apply: %w", service, derr))
	}
}

// nextOnPartition publishes an OrderPaid for a fresh order whose key lands
// on partition p, seeding its SKU, and returns the order, SKU and quantity.
func nextOnPartition(s *session, p int32) (orderID, sku string, quantity int, err error) {
	n, err := s.api.Partitions(s.ctx)
	if err != nil {
		return "", "", 0, err
	}
	orderID, err = s.sameKeyPartition(s.orderID("-next-"), p, n)
	if err != nil {
		return "", "", 0, err
	}
	sku, quantity = s.sku("-next"), 1
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", "", 0, err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, "10.00")
	if err != nil {
		return "", "", 0, err
	}
	paid, err := ev.paid()
	if err != nil {
		return "", "", 0, err
	}
	return orderID, sku, quantity, s.api.Publish(s.ctx, paid)
}

// reasonCode is the short code a DLQ record's failureReason starts with.
func reasonCode(reason string) string {
	code, _, _ := strings.Cut(reason, ":")
	return code
}

// checkMetadata checks a dead letter carries the metadata of docs/design.md,
// Dead letters.
func checkMetadata(s *session, who string, dl deadLetter, eventID, class string, attempts int) error {
	var errs []error
	if dl.EventID != eventID {
		errs = append(errs, fmt.Errorf("eventId %q, want %q", dl.EventID, eventID))
	}
	if dl.OriginalTopic != s.t.Topic {
		errs = append(errs, fmt.Errorf("originalTopic %q, want %q", dl.OriginalTopic, s.t.Topic))
	}
	if dl.ErrorClass != class {
		errs = append(errs, fmt.Errorf("errorClass %s, want %s", dl.ErrorClass, class))
	}
	if dl.Attempts != attempts {
		errs = append(errs, fmt.Errorf("attempts %d, want %d", dl.Attempts, attempts))
	}
	if dl.FailureReason == "" || dl.FirstFailedAt.IsZero() || dl.Consumer == "" {
		errs = append(errs, fmt.Errorf("failureReason %q, firstFailedAt %s, consumer %q: want all set", dl.FailureReason, dl.FirstFailedAt, dl.Consumer))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s's dead letter: %w", who, err)
	}
	return nil
}

// Tutorial: "Schema 非法、缺必填字段通常直接进入死信".
func poisonInvalidJSON(s *session) (string, error) {
	orderID := s.orderID("")
	eventID := event.NewEventID()
	s.planted(orderID, eventID)
	rec := &kgo.Record{Topic: s.t.Topic, Key: []byte(orderID),
		Value: []byte(`{"eventId":"` + eventID + `","eventType":"OrderPaid", this is not JSON`),
		Headers: []kgo.RecordHeader{
			{Key: event.HeaderEventID, Value: []byte(eventID)},
			{Key: event.HeaderEventType, Value: []byte(event.OrderPaid)},
			{Key: event.HeaderEventVersion, Value: []byte("1")},
			{Key: event.HeaderAggregateID, Value: []byte(orderID)},
		}}
	start := time.Now()
	placed, err := s.api.Produce(s.ctx, rec)
	if err != nil {
		return "", err
	}
	partition := placed[0].Partition
	nextID, _, _, err := nextOnPartition(s, partition)
	if err != nil {
		return "", err
	}
	var reason string
	for _, c := range consumers {
		dl, _, err := s.waitDeadLetter(c, orderID)
		if err != nil {
			return "", err
		}
		if err := checkMetadata(s, c, dl, eventID, "PERMANENT", 1); err != nil {
			return "", err
		}
		reason = reasonCode(dl.FailureReason)
	}
	if _, err := s.waitEffects(nextID, "DEDUCTED", 1, 1); err != nil {
		return "", fmt.Errorf("the next order on partition %d: %w", partition, err)
	}
	s.converged = time.Since(start)
	return fmt.Sprintf("dead-lettered at once by %s: PERMANENT %s, attempts 1; next order on partition %d converged",
		strings.Join(consumers, ", "), reason, partition), nil
}

// handlerSlack is what the retry bound allows on top of the backoff waits
// for the handler runs themselves.
const handlerSlack = time.Second

// Tutorial: "重试有上限 … 超过上限进入 DLQ" with the metadata of the
// tutorial's deadLetter.include list, and docs/design.md, Retry and
// backoff: a bad message holds its order no longer than the retry bound.
func poisonRetriesExhausted(s *session) (seen string, err error) {
	const quantity = 2
	attempts := s.t.RetryMaxAttempts
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, seedStock); err != nil {
		return "", err
	}
	ev, err := s.newOrderEvents(orderID, sku, quantity, "20.00")
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
	retries := func() (float64, error) { return s.api.Metric(s.ctx, Inventory, "consumer_retries_total", nil) }
	retriesBefore, err := retries()
	if err != nil {
		return "", err
	}
	// Exactly as many failures as attempts: the event exhausts them all,
	// the next one finds the fail point spent.
	if err := s.api.ArmFailPoint(s.ctx, Inventory, "inventory.apply", "error", attempts); err != nil {
		return "", err
	}
	defer disarm(s, Inventory, &err)
	start := time.Now()
	placed, err := s.api.Produce(s.ctx, rec)
	if err != nil {
		return "", err
	}
	partition := placed[0].Partition
	dl, _, err := s.waitDeadLetter(Inventory, orderID)
	if err != nil {
		return "", err
	}
	if err := checkMetadata(s, Inventory, dl, paid.EventID, "RETRYABLE", attempts); err != nil {
		return "", err
	}
	if err := s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", attempts); err != nil {
		return "", err
	}
	// From the first failure to the dead letter the message held its
	// order; the records' own times measure it.
	held, bound := dl.DeadLetteredAt.Sub(dl.FirstFailedAt), s.t.RetryBound()
	if held > bound+handlerSlack {
		return "", fmt.Errorf("the failing message on partition %d held its order for %s, longer than the retry bound %s (%d attempts, backoff %s doubling to %s, ±50%% jitter): the backoff grows faster than configured",
			partition, held.Round(10*time.Millisecond), bound, attempts, s.t.RetryInitialInterval, s.t.RetryMaxInterval)
	}
	// The fail point counts hits, not events: the next order is published
	// once the poison has spent them all, or, passing the poison in the
	// subscriber's window, it would take one of its failures.
	nextID, _, _, err := nextOnPartition(s, partition)
	if err != nil {
		return "", err
	}
	if _, err := s.waitEffects(nextID, "DEDUCTED", 1, 1); err != nil {
		return "", fmt.Errorf("the next order on partition %d: %w", partition, err)
	}
	s.converged = time.Since(start)
	// Only inventory failed: the others applied it, inventory did nothing.
	if _, err := s.waitEffects(orderID, "NONE", 1, 1); err != nil {
		return "", err
	}
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if st.Deducted != 0 {
		return "", fmt.Errorf("a dead-lettered payment deducted %d of %s", st.Deducted, sku)
	}
	retriesAfter, err := retries()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("DLQ after %d attempts (retries +%v), partition held %s (allowed %s = backoff bound + %s for the runs): RETRYABLE %s, firstFailedAt %s, originalTopic %s; stock untouched; next order on partition %d converged",
		dl.Attempts, retriesAfter-retriesBefore, held.Round(10*time.Millisecond), bound+handlerSlack, handlerSlack, reasonCode(dl.FailureReason),
		dl.FirstFailedAt.UTC().Format(time.RFC3339), dl.OriginalTopic, partition), nil
}

// retriesNow reads consumer_retries_total of every service in services.
func (s *session) retriesNow(services ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, svc := range services {
		n, err := s.api.Metric(s.ctx, svc, "consumer_retries_total", nil)
		if err != nil {
			return nil, err
		}
		out[svc] = n
	}
	return out, nil
}

// noRetries checks no service in before has retried since.
func (s *session) noRetries(before map[string]float64) error {
	for svc, n := range before {
		now, err := s.api.Metric(s.ctx, svc, "consumer_retries_total", nil)
		if err != nil {
			return err
		}
		if now != n {
			return fmt.Errorf("%s retried %v times, want none", svc, now-n)
		}
	}
	return nil
}

// mutatedPaid is a valid OrderPaid of a fresh order, as the relay would
// publish it, with change applied to its JSON (and header) before it is
// sent.
func mutatedPaid(s *session, orderID string, change func(m map[string]any, rec *kgo.Record)) (*kgo.Record, string, error) {
	ev, err := s.newOrderEvents(orderID, s.sku(""), 1, "10.00")
	if err != nil {
		return nil, "", err
	}
	paid, err := ev.paid()
	if err != nil {
		return nil, "", err
	}
	rec, err := suiteapi.Record(s.t.Topic, paid)
	if err != nil {
		return nil, "", err
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		return nil, "", fmt.Errorf("decode %s: %w", paid.EventID, err)
	}
	change(m, rec)
	if rec.Value, err = json.Marshal(m); err != nil {
		return nil, "", fmt.Errorf("encode %s: %w", paid.EventID, err)
	}
	return rec, paid.EventID, nil
}

func poisonSchemaViolation(s *session) (string, error) {
	orderID := s.orderID("")
	rec, eventID, err := mutatedPaid(s, orderID, func(m map[string]any, _ *kgo.Record) {
		if data, ok := m["data"].(map[string]any); ok {
			delete(data, "paymentId")
		}
	})
	if err != nil {
		return "", err
	}
	return deadLetteredAtOnce(s, orderID, eventID, rec, event.ReasonSchemaViolation)
}

func poisonUnknownVersion(s *session) (string, error) {
	orderID := s.orderID("")
	rec, eventID, err := mutatedPaid(s, orderID, func(m map[string]any, rec *kgo.Record) {
		m["eventVersion"] = 99
		for i := range rec.Headers {
			if rec.Headers[i].Key == event.HeaderEventVersion {
				rec.Headers[i].Value = []byte("99")
			}
		}
	})
	if err != nil {
		return "", err
	}
	return deadLetteredAtOnce(s, orderID, eventID, rec, event.ReasonUnknownVersion)
}

// deadLetteredAtOnce publishes a message no consumer can ever handle and
// checks every consumer dead-letters it on the first attempt with reason,
// without a retry, while the next order on its partition converges.
func deadLetteredAtOnce(s *session, orderID, eventID string, rec *kgo.Record, reason string) (string, error) {
	before, err := s.retriesNow(consumers...)
	if err != nil {
		return "", err
	}
	start := time.Now()
	placed, err := s.api.Produce(s.ctx, rec)
	if err != nil {
		return "", err
	}
	partition := placed[0].Partition
	nextID, _, _, err := nextOnPartition(s, partition)
	if err != nil {
		return "", err
	}
	for _, c := range consumers {
		dl, _, err := s.waitDeadLetter(c, orderID)
		if err != nil {
			return "", err
		}
		if err := checkMetadata(s, c, dl, eventID, "PERMANENT", 1); err != nil {
			return "", err
		}
		if got := reasonCode(dl.FailureReason); got != reason {
			return "", fmt.Errorf("%s's dead letter: failureReason %q, want %s", c, dl.FailureReason, reason)
		}
	}
	if _, err := s.waitEffects(nextID, "DEDUCTED", 1, 1); err != nil {
		return "", fmt.Errorf("the next order on partition %d: %w", partition, err)
	}
	s.converged = time.Since(start)
	if err := s.noRetries(before); err != nil {
		return "", err
	}
	return fmt.Sprintf("dead-lettered at once by %s: PERMANENT %s, attempts 1, retries +0; next order on partition %d converged",
		strings.Join(consumers, ", "), reason, partition), nil
}
