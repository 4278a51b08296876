package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
)

// nextOnPartition publishes an OrderPaid for a fresh order whose key lands
// on partition p, seeding its SKU. The returned wait waits until the
// consumers have applied it: a message they could not handle does not
// hold its partition.
func (s *session) nextOnPartition(p int32) (wait func()) {
	next := s.sameKeyPartition(s.orderID("-next-"), p, must(s.api.Partitions(s.ctx)))
	check(s.api.Publish(s.ctx, s.newOrderEvents(next, s.seeded("-next", seedStock), 1, "10.00").paid()))
	return func() {
		s.waitEffectsFor(s.t.Timeout, fmt.Sprintf("the next order on partition %d: %s applied", p, next), next, "DEDUCTED", 1, 1)
	}
}

// reasonCode is the short code a DLQ record's failureReason starts with.
func reasonCode(reason string) string {
	code, _, _ := strings.Cut(reason, ":")
	return code
}

// checkMetadata checks a dead letter carries the metadata of docs/design.md,
// Dead letters, and that it went to the dead-letter topic with the same;
// reason, unless "", is the code its failureReason starts with.
func (s *session) checkMetadata(who string, dl deadLetter, eventID, class, reason string, attempts int) {
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
	if reason != "" && reasonCode(dl.FailureReason) != reason {
		errs = append(errs, fmt.Errorf("failureReason %q, want %s", dl.FailureReason, reason))
	}
	if dl.Attempts != attempts {
		errs = append(errs, fmt.Errorf("attempts %d, want %d", dl.Attempts, attempts))
	}
	if dl.FailureReason == "" || dl.FirstFailedAt.IsZero() || dl.Consumer == "" {
		errs = append(errs, fmt.Errorf("failureReason %q, firstFailedAt %s, consumer %q: want all set", dl.FailureReason, dl.FirstFailedAt, dl.Consumer))
	}
	checkf(errors.Join(errs...), "%s's dead letter", who)
	s.checkOnDLQTopic(who, dl)
}

// checkOnDLQTopic waits for dl on the dead-letter topic, where the consumer
// publishes it after recording it and before it acknowledges the message,
// and checks the record's metadata says what the recorded one says.
func (s *session) checkOnDLQTopic(who string, dl deadLetter) {
	var headers map[string]string
	s.waitFor(s.t.Timeout, fmt.Sprintf("%s's dead letter of %s on %s", who, dl.EventID, s.t.DLQTopic), func() (string, bool, error) {
		all, err := s.api.DeadLetterHeaders(s.ctx, dl.EventID)
		for _, h := range all {
			if h[consumer.MetaConsumer] == dl.Consumer {
				headers = h
				return "", true, err
			}
		}
		return fmt.Sprintf("%d dead letters of the event there, none from %s", len(all), dl.Consumer), false, err
	})
	var errs []error
	for _, m := range []struct{ key, want string }{
		{consumer.MetaErrorClass, dl.ErrorClass},
		{consumer.MetaFailureReason, dl.FailureReason},
		{consumer.MetaAttempts, strconv.Itoa(dl.Attempts)},
		{consumer.MetaOriginalTopic, dl.OriginalTopic},
	} {
		if got := headers[m.key]; got != m.want {
			errs = append(errs, fmt.Errorf("%s %q, want %q as recorded", m.key, got, m.want))
		}
	}
	checkf(errors.Join(errs...), "%s's dead letter on %s", who, s.t.DLQTopic)
}

// poison is a message no consumer can ever handle, and what every
// consumer's dead letter of it must say.
type poison struct {
	// reason is the failureReason code every dead letter carries; ""
	// takes the one they carry, and leaves the retries unchecked.
	reason string
	// message builds the message of a fresh order and returns it with its
	// eventId.
	message func(s *session, orderID string) (*kgo.Record, string)
}

// Tutorial: "Schema 非法、缺必填字段通常直接进入死信" — the poison cases, one
// row each: invalid JSON, a schema violation, an unknown event version.
var (
	invalidJSON = poison{message: mutatedPaid(func(rec *kgo.Record, eventID string) {
		rec.Value = []byte(`{"eventId":"` + eventID + `","eventType":"OrderPaid", this is not JSON`)
	})}
	schemaViolation = poison{reason: event.ReasonSchemaViolation, message: mutatedPaid(func(rec *kgo.Record, _ string) {
		editJSON(rec, func(m map[string]any) {
			if data, ok := m["data"].(map[string]any); ok {
				delete(data, "paymentId")
			}
		})
	})}
	unknownVersion = poison{reason: event.ReasonUnknownVersion, message: mutatedPaid(func(rec *kgo.Record, _ string) {
		editJSON(rec, func(m map[string]any) { m["eventVersion"] = 99 })
		for i := range rec.Headers {
			if rec.Headers[i].Key == event.HeaderEventVersion {
				rec.Headers[i].Value = []byte("99")
			}
		}
	})}
)

// mutatedPaid builds a valid OrderPaid of a fresh order, as the relay
// would publish it, with change applied to the record before it is sent.
func mutatedPaid(change func(rec *kgo.Record, eventID string)) func(s *session, orderID string) (*kgo.Record, string) {
	return func(s *session, orderID string) (*kgo.Record, string) {
		paid := s.newOrderEvents(orderID, s.sku(""), 1, "10.00").paid()
		rec := s.record(paid)
		change(rec, paid.EventID)
		return rec, paid.EventID
	}
}

// editJSON applies change to the record's JSON value.
func editJSON(rec *kgo.Record, change func(m map[string]any)) {
	var m map[string]any
	check(json.Unmarshal(rec.Value, &m))
	change(m)
	rec.Value = must(json.Marshal(m))
}

// deadLetteredAtOnce publishes the poison and checks every consumer
// dead-letters it on the first attempt, without a retry, while the next
// order on its partition converges.
func deadLetteredAtOnce(p poison) body {
	return func(s *session) string {
		orderID := s.orderID("")
		rec, eventID := p.message(s, orderID)
		before := s.counts(retries, consumers...)
		start := time.Now()
		partition := s.produce(rec)
		waitNext := s.nextOnPartition(partition)
		var reason string
		for _, c := range consumers {
			dl := s.waitDeadLetter(c, orderID)
			s.checkMetadata(c, dl, eventID, "PERMANENT", p.reason, 1)
			reason = reasonCode(dl.FailureReason)
		}
		waitNext()
		s.converged = time.Since(start)
		retried := ""
		if p.reason != "" {
			s.noRetries(before)
			retried = ", retries +0"
		}
		return fmt.Sprintf("dead-lettered at once by %s: PERMANENT %s, attempts 1%s; next order on partition %d converged",
			strings.Join(consumers, ", "), reason, retried, partition)
	}
}

// handlerSlack is what the retry bound allows on top of the backoff waits
// for the handler runs themselves.
const handlerSlack = time.Second

// Tutorial: "重试有上限 … 超过上限进入 DLQ" with the metadata of the
// tutorial's deadLetter.include list, and docs/design.md, Retry and
// backoff: a bad message holds its order no longer than the retry bound.
func poisonRetriesExhausted(s *session) string {
	attempts := s.t.RetryMaxAttempts
	orderID, sku := s.orderID(""), s.seeded("", seedStock)
	paid := s.newOrderEvents(orderID, sku, 2, "20.00").paid()
	rec := s.record(paid)
	before := s.counts(retries, Inventory)
	// Exactly as many failures as attempts: the event exhausts them all,
	// the next one finds the fail point spent.
	s.arm(Inventory, "inventory.apply", "error", attempts)
	start := time.Now()
	partition := s.produce(rec)
	dl := s.waitDeadLetter(Inventory, orderID)
	s.checkMetadata(Inventory, dl, paid.EventID, "RETRYABLE", "", attempts)
	check(s.api.FailPointFired(s.ctx, Inventory, "inventory.apply", attempts))
	// From the first failure to the dead letter the message held its
	// order; the records' own times measure it.
	held, bound := dl.DeadLetteredAt.Sub(dl.FirstFailedAt), s.t.RetryBound()
	if held > bound+handlerSlack {
		fail("the failing message on partition %d held its order for %s, longer than the retry bound %s (%d attempts, backoff %s doubling to %s, ±50%% jitter): the backoff grows faster than configured",
			partition, held.Round(10*time.Millisecond), bound, attempts, s.t.RetryInitialInterval, s.t.RetryMaxInterval)
	}
	// The fail point counts hits, not events: the next order is published
	// once the poison has spent them all, or, passing the poison in the
	// subscriber's window, it would take one of its failures.
	s.nextOnPartition(partition)()
	s.converged = time.Since(start)
	// Only inventory failed: the others applied it, inventory did nothing.
	s.waitEffects(orderID, "NONE", 1, 1)
	s.stockIs(sku, seedStock, 0, "after a dead-lettered payment")
	return fmt.Sprintf("DLQ after %d attempts (retries +%v), partition held %s (allowed %s = backoff bound + %s for the runs): RETRYABLE %s, firstFailedAt %s, originalTopic %s; stock untouched; next order on partition %d converged",
		dl.Attempts, s.grown(retries, before)[Inventory], held.Round(10*time.Millisecond), bound+handlerSlack, handlerSlack, reasonCode(dl.FailureReason),
		dl.FirstFailedAt.UTC().Format(time.RFC3339), dl.OriginalTopic, partition)
}
