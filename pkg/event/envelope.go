// Package event is the contract of the order-events topic: the envelope every
// message carries, the payload of each event type, and one JSON Schema per
// (eventType, eventVersion) that producers and consumers both enforce.
package event

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Type names an event on the order-events topic.
type Type string

// The order events, in lifecycle order.
const (
	OrderCreated         Type = "OrderCreated"
	OrderCheckedOut      Type = "OrderCheckedOut"
	OrderPaid            Type = "OrderPaid"
	OrderRefundRequested Type = "OrderRefundRequested"
	OrderRefunded        Type = "OrderRefunded"
	OrderRefundRejected  Type = "OrderRefundRejected"
	OrderCancelled       Type = "OrderCancelled"
	// OrderPaymentRejected: a payment succeeded for an order that cannot
	// take it (cancelled before the payment arrived); the payment service
	// returns it.
	OrderPaymentRejected Type = "OrderPaymentRejected"
	// OrderPaymentReturned: that payment has been returned in full.
	OrderPaymentReturned Type = "OrderPaymentReturned"
)

// Known reports whether t is one of the order events above: a header
// naming another type is not trusted to say whose business the message
// is (pkg/consumer skips only known types a consumer does not handle).
func (t Type) Known() bool {
	switch t {
	case OrderCreated, OrderCheckedOut, OrderPaid, OrderRefundRequested, OrderRefunded,
		OrderRefundRejected, OrderCancelled, OrderPaymentRejected, OrderPaymentReturned:
		return true
	}
	return false
}

// CurrentVersion is the eventVersion a producer writes for t. Consumers
// read every version that has a schema: OrderRefunded v1 (one refund that
// returned every item), v2 (partial refunds, with the goods each returns
// and the running totals) and v3 (v2 whose refundedAmount may be zero: a
// return of goods whose money was refunded before).
func CurrentVersion(t Type) int {
	if t == OrderRefunded {
		return 3
	}
	return 1
}

// Envelope is the value of every Kafka message (docs/design.md, Event
// contract). Field names are part of the public contract.
type Envelope struct {
	EventID          string          `json:"eventId"`
	EventType        Type            `json:"eventType"`
	EventVersion     int             `json:"eventVersion"`
	OccurredAt       time.Time       `json:"occurredAt"`
	AggregateID      string          `json:"aggregateId"`
	AggregateVersion int64           `json:"aggregateVersion"`
	TraceID          string          `json:"traceId"`
	Producer         string          `json:"producer"`
	Data             json.RawMessage `json:"data"`
}

// Meta is what a producer knows about an event before it has an id.
type Meta struct {
	AggregateID      string
	AggregateVersion int64
	Producer         string
	// TraceID continues an incoming trace; empty starts a new one.
	TraceID string
	// OccurredAt defaults to now.
	OccurredAt time.Time
	// EventVersion defaults to CurrentVersion; an older one lets a test
	// produce what an earlier release wrote.
	EventVersion int
}

// New builds an envelope of t's current version (or meta's) with a fresh
// eventId and validates it against its schema, so an invalid event never
// reaches the outbox.
func New(t Type, meta Meta, data any) (Envelope, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Envelope{}, fmt.Errorf("encode %s data: %w", t, err)
	}
	occurred := meta.OccurredAt
	if occurred.IsZero() {
		occurred = time.Now()
	}
	traceID := meta.TraceID
	if traceID == "" {
		traceID = NewTraceID()
	}
	version := meta.EventVersion
	if version == 0 {
		version = CurrentVersion(t)
	}
	env := Envelope{
		EventID:          NewEventID(),
		EventType:        t,
		EventVersion:     version,
		OccurredAt:       occurred.UTC().Truncate(time.Millisecond),
		AggregateID:      meta.AggregateID,
		AggregateVersion: meta.AggregateVersion,
		TraceID:          traceID,
		Producer:         meta.Producer,
		Data:             raw,
	}
	if _, err := env.Marshal(); err != nil {
		return Envelope{}, err
	}
	return env, nil
}

// NewEventID returns a globally unique, time-ordered event id.
func NewEventID() string {
	return "E-" + uuid.Must(uuid.NewV7()).String()
}

// NewTraceID returns a W3C trace id (32 lowercase hex digits).
func NewTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Marshal validates the envelope against its schema and encodes it.
func (e Envelope) Marshal() ([]byte, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	if err := Validate(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Parse validates raw against the schema of its (eventType, eventVersion)
// and decodes it, from one scan of raw. Every error it returns is an
// *InvalidError: retrying the same bytes can never succeed.
func Parse(raw []byte) (Envelope, error) {
	return parse(raw, true)
}

// DecodeData decodes the payload into v.
func (e Envelope) DecodeData(v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return &InvalidError{Reason: ReasonSchemaViolation, Err: fmt.Errorf("decode %s data: %w", e.EventType, err)}
	}
	return nil
}

// Traceparent is the W3C traceparent header carrying the envelope's trace.
func (e Envelope) Traceparent() string {
	trace := e.TraceID
	for len(trace) < 32 {
		trace = "0" + trace
	}
	span := e.EventID
	sum := uuid.NewSHA1(uuid.NameSpaceOID, []byte(span))
	return "00-" + trace + "-" + hex.EncodeToString(sum[:8]) + "-01"
}
