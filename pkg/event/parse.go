package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"sync"

	"github.com/reliable-orders/fulfillment/pkg/internal/jsoncheck"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// checkers is the event schemas compiled once, like compiled: the schemas
// are embedded, so the table is read-only after its first use.
var checkers = sync.OnceValues(compileCheckers)

func compileCheckers() (jsoncheck.Set, error) { return compileCheckersFrom(Schemas) }

// compileCheckersFrom compiles the schemas under schemas/ in fsys with the
// value rules they reference (rules.json, pkg/rules).
func compileCheckersFrom(fsys fs.FS) (jsoncheck.Set, error) {
	files, err := schemaFiles(fsys)
	if err != nil {
		return jsoncheck.Set{}, err
	}
	return jsoncheck.Compile(files)
}

// schemaFiles reads the schemas under schemas/ in fsys, by file name, and
// adds rules.json, which they reference.
func schemaFiles(fsys fs.FS) (map[string][]byte, error) {
	names, err := fs.Glob(fsys, "schemas/*.json")
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{rules.File: rules.Schema()}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		files[path.Base(name)] = raw
	}
	return files, nil
}

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
	d := jsoncheck.NewDocument()
	defer d.Release()
	if err := d.Scan(raw); err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	t, version, err := head(d)
	if err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	ch, ok := set.Roots[SchemaName(t, version)]
	if !ok {
		return Envelope{}, &InvalidError{Reason: ReasonUnknownVersion,
			Err: fmt.Errorf("%w: %q v%d", ErrUnknownVersion, t, version)}
	}
	if err := ch.Check(d, 0); err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonSchemaViolation, Err: err}
	}
	if key, field, found := caseVariant(set, d, 0); found {
		return Envelope{}, &InvalidError{Reason: ReasonSchemaViolation,
			Err: fmt.Errorf("key %q differs from the contract's field %q only in case", key, field)}
	}
	if !fill {
		return Envelope{}, nil
	}
	env, err := envelope(d)
	if err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	return env, nil
}

// head reads eventType and eventVersion as json.Unmarshal reads them into
// a struct: keys match case-insensitively, every match is decoded in
// order and the last wins, null leaves the field alone, and a value of
// another type fails.
func head(d *jsoncheck.Document) (Type, int, error) {
	root := &d.Nodes[0]
	switch root.Kind {
	case jsoncheck.KindNull:
		return "", 0, nil
	case jsoncheck.KindObject:
	default:
		return "", 0, fmt.Errorf("json: cannot unmarshal %s into an event", jsoncheck.KindName(root.Kind))
	}
	var (
		t       Type
		version int
		first   error
	)
	for j := 1; j < root.Next; j = d.Nodes[j].Next {
		n := &d.Nodes[j]
		switch {
		case bytes.EqualFold(n.Key, []byte("eventType")):
			s, err := d.StringField(n, "eventType")
			if err != nil {
				first = firstError(first, err)
			} else if s != nil {
				t = Type(*s)
			}
		case bytes.EqualFold(n.Key, []byte("eventVersion")):
			v, err := d.IntField(n, "eventVersion", strconv.IntSize)
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

// envelope decodes the root object into an Envelope as json.Unmarshal
// does, from the nodes the schema was checked over.
func envelope(d *jsoncheck.Document) (Envelope, error) {
	var (
		env   Envelope
		first error
	)
	str := func(n *jsoncheck.Node, field string, dst *string) {
		s, err := d.StringField(n, field)
		if err != nil {
			first = firstError(first, err)
		} else if s != nil {
			*dst = *s
		}
	}
	root := &d.Nodes[0]
	for j := 1; j < root.Next; j = d.Nodes[j].Next {
		n := &d.Nodes[j]
		switch envelopeField(n.Key) {
		case "eventId":
			str(n, "eventId", &env.EventID)
		case "eventType":
			str(n, "eventType", (*string)(&env.EventType))
		case "eventVersion":
			v, err := d.IntField(n, "eventVersion", strconv.IntSize)
			if err != nil {
				first = firstError(first, err)
			} else if v != nil {
				env.EventVersion = int(*v)
			}
		case "occurredAt":
			if err := env.OccurredAt.UnmarshalJSON(d.Bytes(n)); err != nil {
				first = firstError(first, err)
			}
		case "aggregateId":
			str(n, "aggregateId", &env.AggregateID)
		case "aggregateVersion":
			v, err := d.IntField(n, "aggregateVersion", 64)
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
			env.Data = bytes.Clone(d.Bytes(n))
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
func caseVariant(s jsoncheck.Set, d *jsoncheck.Document, i int) (key, field string, found bool) {
	n := &d.Nodes[i]
	switch n.Kind {
	case jsoncheck.KindArray:
		for j := i + 1; j < n.Next; j = d.Nodes[j].Next {
			if key, field, found = caseVariant(s, d, j); found {
				return key, field, true
			}
		}
	case jsoncheck.KindObject:
		var buf [16]int
		ms := d.Members(buf[:0], i)
		var last map[string]int
		if len(ms) > len(buf) {
			last = make(map[string]int, len(ms))
			for k, j := range ms {
				last[string(d.Nodes[j].Key)] = k
			}
		}
		for k, j := range ms {
			name := d.Nodes[j].Key
			if !s.Fields[string(name)] {
				for _, f := range s.FieldList {
					if bytes.EqualFold(name, []byte(f)) {
						return string(name), f, true
					}
				}
			}
			if last != nil && last[string(name)] != k || last == nil && d.Overridden(ms, k) {
				continue
			}
			if key, field, found = caseVariant(s, d, j); found {
				return key, field, true
			}
		}
	}
	return "", "", false
}
