package loadgen

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// idDigits is the zero padding of the index in a run's ids (OrderID).
const idDigits = 6

// paidTemplate writes the records of a run's OrderPaid events by appending
// their few varying parts (the index, the SKU, the trace, the time) between
// constant pieces. event.New would cost a JSON encoding and a schema
// validation per event, many times what producing the event costs, so the
// template is checked once instead, by newPaidTemplate, against the record
// the schema-validated path builds.
type paidTemplate struct {
	runID string
	skus  int
	// idPrefix is the length of "E-<run>-", "O-<run>-" and the like.
	idPrefix int
	// The pieces of the payload between the varying parts, in order.
	eventID, occurredAt, orderID, traceID, paymentID, customerID, sku, end string
	eventType, eventVersion                                                []byte
}

// newPaidTemplate returns the template of run runID's OrderPaid events
// over skus SKUs, once the record it builds for an order equals, byte for
// byte, the one OrderPaid and suiteapi.Record build.
func newPaidTemplate(runID string, skus int) (*paidTemplate, error) {
	amount, err := event.ParseMoney(UnitPrice)
	if err != nil {
		return nil, err
	}
	version := event.CurrentVersion(event.OrderPaid)
	t := &paidTemplate{
		runID:    runID,
		skus:     skus,
		idPrefix: len("E-" + runID + "-"),
		eventID:  `{"eventId":"E-` + runID + `-`,
		occurredAt: `","eventType":"` + string(event.OrderPaid) + `","eventVersion":` + strconv.Itoa(version) +
			`,"occurredAt":"`,
		orderID:      `","aggregateId":"O-` + runID + `-`,
		traceID:      `","aggregateVersion":` + strconv.Itoa(PaidVersion) + `,"traceId":"`,
		paymentID:    `","producer":"` + Producer + `","data":{"paymentId":"P-` + runID + `-`,
		customerID:   `","paidAmount":"` + amount.String() + `","currency":"` + Currency + `","customerId":"C-` + runID + `-`,
		sku:          `","items":[{"sku":"SKU-` + runID + `-`,
		end:          `","quantity":` + strconv.Itoa(ItemQuantity) + `}]}}`,
		eventType:    []byte(event.OrderPaid),
		eventVersion: []byte(strconv.Itoa(version)),
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("OrderPaid template of run %s: %w", runID, err)
	}
	return t, nil
}

// check compares the records of a few orders, small and large indexes,
// with the ones the schema-validated path builds.
func (t *paidTemplate) check() error {
	now := time.Now()
	stamp := appendStamp(nil, now)
	for _, i := range []int{1, t.skus + 1, 1_000_000} {
		env, err := OrderPaid(t.runID, i, t.skus, now)
		if err != nil {
			return err
		}
		want, err := suiteapi.Record("", env)
		if err != nil {
			return err
		}
		var got kgo.Record
		t.record(&got, make([]kgo.RecordHeader, 0, 5), nil, i, stamp)
		if err := sameRecord(&got, want); err != nil {
			return fmt.Errorf("order %d: %w", i, err)
		}
	}
	return nil
}

// sameRecord reports how got differs from want in key, value or headers.
func sameRecord(got, want *kgo.Record) error {
	if !bytes.Equal(got.Key, want.Key) {
		return fmt.Errorf("key %q, want %q", got.Key, want.Key)
	}
	if !bytes.Equal(got.Value, want.Value) {
		return fmt.Errorf("value\n%s\nwant\n%s", got.Value, want.Value)
	}
	if len(got.Headers) != len(want.Headers) {
		return fmt.Errorf("%d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for j, h := range want.Headers {
		if got.Headers[j].Key != h.Key || !bytes.Equal(got.Headers[j].Value, h.Value) {
			return fmt.Errorf("header %s=%q, want %s=%q", got.Headers[j].Key, got.Headers[j].Value, h.Key, h.Value)
		}
	}
	return nil
}

// appendStamp appends occurredAt as the envelope carries it: UTC, to the
// millisecond, in the form time.Time encodes to JSON.
func appendStamp(dst []byte, occurredAt time.Time) []byte {
	return occurredAt.UTC().Truncate(time.Millisecond).AppendFormat(dst, time.RFC3339Nano)
}

// record fills rec with order i's OrderPaid, occurred at stamp (from
// appendStamp): its key, value and header values are appended to arena,
// its headers to headers (which must have room for five). It returns the
// arena, which the caller keeps appending to: the bytes already handed out
// stay where they are even when it grows.
func (t *paidTemplate) record(rec *kgo.Record, headers []kgo.RecordHeader, arena []byte, i int, stamp []byte) []byte {
	start := len(arena)
	arena = append(arena, t.eventID...)
	idAt := len(arena) - t.idPrefix
	arena = appendIndex(arena, i)
	eventID := arena[idAt:len(arena):len(arena)]
	trace := sha256.Sum256(eventID)
	arena = append(arena, t.occurredAt...)
	arena = append(arena, stamp...)
	arena = append(arena, t.orderID...)
	orderAt := len(arena) - t.idPrefix
	arena = appendIndex(arena, i)
	orderID := arena[orderAt:len(arena):len(arena)]
	arena = append(arena, t.traceID...)
	traceAt := len(arena)
	arena = hex.AppendEncode(arena, trace[:16])
	traceID := arena[traceAt:len(arena):len(arena)]
	arena = append(arena, t.paymentID...)
	arena = appendIndex(arena, i)
	arena = append(arena, t.customerID...)
	arena = appendIndex(arena, i)
	arena = append(arena, t.sku...)
	arena = strconv.AppendInt(arena, int64((i-1)%t.skus+1), 10)
	arena = append(arena, t.end...)
	value := arena[start:len(arena):len(arena)]

	parentAt := len(arena)
	arena = append(arena, "00-"...)
	arena = append(arena, traceID...)
	arena = append(arena, '-')
	span := spanID(eventID)
	arena = hex.AppendEncode(arena, span[:])
	arena = append(arena, "-01"...)
	traceparent := arena[parentAt:len(arena):len(arena)]

	rec.Key, rec.Value = orderID, value
	rec.Headers = append(headers, //nolint:gocritic // appendAssign: headers is the caller's room for the record's headers
		kgo.RecordHeader{Key: event.HeaderEventID, Value: eventID},
		kgo.RecordHeader{Key: event.HeaderEventType, Value: t.eventType},
		kgo.RecordHeader{Key: event.HeaderEventVersion, Value: t.eventVersion},
		kgo.RecordHeader{Key: event.HeaderAggregateID, Value: orderID},
		kgo.RecordHeader{Key: event.HeaderTraceparent, Value: traceparent},
	)
	return arena
}

// appendIndex appends i zero-padded to idDigits, as OrderID formats it.
func appendIndex(dst []byte, i int) []byte {
	var buf [20]byte
	digits := strconv.AppendInt(buf[:0], int64(i), 10)
	for range idDigits - len(digits) {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// spanID is the span id of the traceparent header of the event eventID:
// the first eight bytes of its name-based (SHA-1) UUID in the OID
// namespace, as event.Envelope.Traceparent derives it, computed without
// the allocations of uuid.NewSHA1.
func spanID(eventID []byte) [8]byte {
	var buf [16 + 64]byte
	n := copy(buf[:], uuid.NameSpaceOID[:])
	var sum [sha1.Size]byte
	if n+len(eventID) <= len(buf) {
		n += copy(buf[n:], eventID)
		sum = sha1.Sum(buf[:n])
	} else {
		sum = sha1.Sum(append(buf[:n:n], eventID...))
	}
	var span [8]byte
	copy(span[:], sum[:8])
	span[6] = span[6]&0x0f | 0x50 // the UUID's version, 5
	return span
}
