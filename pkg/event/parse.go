package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// checkers is the event schemas compiled once, like compiled: the schemas
// are embedded, so the table is read-only after its first use.
var checkers = sync.OnceValues(compileCheckers)

// maxPooledNodes bounds the node slice a document keeps for reuse, so one
// huge message does not pin its memory in the pool.
const maxPooledNodes = 4096

// parse is Validate, and with fill Parse, over one scan of raw. It answers
// as validateReference and parseReference do, in the same order: a syntax
// error or an eventType or eventVersion json.Unmarshal cannot read is
// INVALID_JSON, then an unknown (eventType, eventVersion), then the
// schema, then a case-variant key, then an envelope field json.Unmarshal
// cannot read (an aggregateVersion of 1.0, say, which the schema's
// "integer" admits).
func parse(raw []byte, fill bool) (Envelope, error) {
	set, err := checkers()
	if err != nil {
		return Envelope{}, fmt.Errorf("load event schemas: %w", err)
	}
	if !json.Valid(raw) {
		var v struct{}
		err := json.Unmarshal(raw, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	d := documents.Get().(*document)
	defer func() {
		clear(d.nodes)
		d.raw, d.nodes = nil, d.nodes[:0]
		if cap(d.nodes) <= maxPooledNodes {
			documents.Put(d)
		}
	}()
	if err := d.scan(raw); err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	t, version, err := d.head()
	if err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	ch, ok := set.events[SchemaName(t, version)]
	if !ok {
		return Envelope{}, &InvalidError{Reason: ReasonUnknownVersion,
			Err: fmt.Errorf("%w: %q v%d", ErrUnknownVersion, t, version)}
	}
	if err := ch.check(d, 0); err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonSchemaViolation, Err: err}
	}
	if key, field, found := set.caseVariant(d, 0); found {
		return Envelope{}, &InvalidError{Reason: ReasonSchemaViolation,
			Err: fmt.Errorf("key %q differs from the contract's field %q only in case", key, field)}
	}
	if !fill {
		return Envelope{}, nil
	}
	env, err := d.envelope()
	if err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	return env, nil
}

// typeError is what json.Unmarshal says of a value it cannot read into a
// field.
func typeError(n *node, field string) error {
	return fmt.Errorf("json: cannot unmarshal %s into field %s", kindName(n.kind), field)
}

// head reads eventType and eventVersion as json.Unmarshal reads them into
// a struct: keys match case-insensitively, every match is decoded in
// order and the last wins, null leaves the field alone, and a value of
// another type fails.
func (d *document) head() (Type, int, error) {
	root := &d.nodes[0]
	switch root.kind {
	case kindNull:
		return "", 0, nil
	case kindObject:
	default:
		return "", 0, fmt.Errorf("json: cannot unmarshal %s into an event", kindName(root.kind))
	}
	var (
		t       Type
		version int
		first   error
	)
	for j := 1; j < root.next; j = d.nodes[j].next {
		n := &d.nodes[j]
		switch {
		case bytes.EqualFold(n.key, []byte("eventType")):
			s, err := d.stringField(n, "eventType")
			if err != nil {
				first = firstError(first, err)
			} else if s != nil {
				t = Type(*s)
			}
		case bytes.EqualFold(n.key, []byte("eventVersion")):
			v, err := d.intField(n, "eventVersion", strconv.IntSize)
			if err != nil {
				first = firstError(first, err)
			} else if v != nil {
				version = int(*v)
			}
		}
	}
	return t, version, first
}

// firstError keeps the first error, as json.Unmarshal reports the first
// field it could not read.
func firstError(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// stringField reads n into a string field: nil for null.
func (d *document) stringField(n *node, field string) (*string, error) {
	switch n.kind {
	case kindNull:
		return nil, nil
	case kindString:
		b, err := d.str(n)
		if err != nil {
			return nil, err
		}
		s := string(b)
		return &s, nil
	}
	return nil, typeError(n, field)
}

// intField reads n into an integer field of bits bits: nil for null.
func (d *document) intField(n *node, field string, bits int) (*int64, error) {
	switch n.kind {
	case kindNull:
		return nil, nil
	case kindNumber:
		v, err := strconv.ParseInt(string(d.bytes(n)), 10, bits)
		if err != nil {
			return nil, fmt.Errorf("json: cannot unmarshal number %s into field %s", d.bytes(n), field)
		}
		return &v, nil
	}
	return nil, typeError(n, field)
}

// envelope decodes the root object into an Envelope as json.Unmarshal
// does, from the nodes the schema was checked over.
func (d *document) envelope() (Envelope, error) {
	var (
		env   Envelope
		first error
	)
	str := func(n *node, field string, dst *string) {
		s, err := d.stringField(n, field)
		if err != nil {
			first = firstError(first, err)
		} else if s != nil {
			*dst = *s
		}
	}
	root := &d.nodes[0]
	for j := 1; j < root.next; j = d.nodes[j].next {
		n := &d.nodes[j]
		switch envelopeField(n.key) {
		case "eventId":
			str(n, "eventId", &env.EventID)
		case "eventType":
			str(n, "eventType", (*string)(&env.EventType))
		case "eventVersion":
			v, err := d.intField(n, "eventVersion", strconv.IntSize)
			if err != nil {
				first = firstError(first, err)
			} else if v != nil {
				env.EventVersion = int(*v)
			}
		case "occurredAt":
			if err := env.OccurredAt.UnmarshalJSON(d.bytes(n)); err != nil {
				first = firstError(first, err)
			}
		case "aggregateId":
			str(n, "aggregateId", &env.AggregateID)
		case "aggregateVersion":
			v, err := d.intField(n, "aggregateVersion", 64)
			if err != nil {
				first = firstError(first, err)
			} else if v != nil {
				env.AggregateVersion = *v
			}
		case "traceId":
			str(n, "traceId", &env.TraceID)
		case "producer":
			str(n, "producer", &env.Producer)
		case "data":
			env.Data = bytes.Clone(d.bytes(n))
		}
	}
	if first != nil {
		return Envelope{}, first
	}
	return env, nil
}

// envelopeFields are the JSON names of Envelope's fields.
func envelopeFields() [9]string {
	return [...]string{"eventId", "eventType", "eventVersion", "occurredAt", "aggregateId",
		"aggregateVersion", "traceId", "producer", "data"}
}

// envelopeField returns the Envelope field json.Unmarshal reads key into,
// or "".
func envelopeField(key []byte) string {
	fields := envelopeFields()
	for _, f := range fields {
		if string(key) == f {
			return f
		}
	}
	for _, f := range fields {
		if bytes.EqualFold(key, []byte(f)) {
			return f
		}
	}
	return ""
}

// caseVariant is schemaSet.caseVariant over a scanned document: it visits
// the values an object keeps (the last of a repeated name), as the
// reference does over the decoded map.
func (s checkerSet) caseVariant(d *document, i int) (key, field string, found bool) {
	n := &d.nodes[i]
	switch n.kind {
	case kindArray:
		for j := i + 1; j < n.next; j = d.nodes[j].next {
			if key, field, found = s.caseVariant(d, j); found {
				return key, field, true
			}
		}
	case kindObject:
		var buf [16]int
		ms := d.members(buf[:0], i)
		var last map[string]int
		if len(ms) > len(buf) {
			last = make(map[string]int, len(ms))
			for k, j := range ms {
				last[string(d.nodes[j].key)] = k
			}
		}
		for k, j := range ms {
			name := d.nodes[j].key
			if !s.fields[string(name)] {
				for _, f := range s.fieldList {
					if bytes.EqualFold(name, []byte(f)) {
						return string(name), f, true
					}
				}
			}
			if last != nil && last[string(name)] != k || last == nil && d.overridden(ms, k) {
				continue
			}
			if key, field, found = s.caseVariant(d, j); found {
				return key, field, true
			}
		}
	}
	return "", "", false
}
