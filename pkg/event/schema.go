package event

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/reliable-orders/fulfillment/pkg/internal/jsoncheck"
)

// Schemas holds one JSON Schema per (eventType, eventVersion), named
// "<EventType>.v<N>.json", plus the shared envelope.json. The value rules
// they reference ("rules.json#/$defs/id") are pkg/rules' rules.json.
//
//go:embed schemas/*.json
var Schemas embed.FS

// Reasons an event is rejected. They go into DLQ records as failureReason.
const (
	ReasonInvalidJSON     = "INVALID_JSON"
	ReasonSchemaViolation = "SCHEMA_VIOLATION"
	ReasonUnknownVersion  = "UNKNOWN_EVENT_VERSION"
)

// ErrUnknownVersion is wrapped when no schema exists for an event's
// (eventType, eventVersion).
var ErrUnknownVersion = errors.New("no schema for this event type and version")

// InvalidError says why bytes are not a valid event. It is permanent:
// redelivering the same bytes fails the same way.
type InvalidError struct {
	Reason string
	Err    error
}

func (e *InvalidError) Error() string { return e.Reason + ": " + e.Err.Error() }

func (e *InvalidError) Unwrap() error { return e.Err }

// compiled is built once: the schemas are embedded and never change at run
// time, so a lazily initialised read-only table is safe to share.
var compiled = sync.OnceValues(compileSchemas)

// schemaSet is every compiled event schema, by SchemaName.
type schemaSet struct {
	events map[string]*jsonschema.Schema
	// fields is every property name the schemas define.
	fields map[string]bool
}

func compileSchemas() (schemaSet, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	files, err := schemaFiles(Schemas)
	if err != nil {
		return schemaSet{}, err
	}
	set := schemaSet{events: map[string]*jsonschema.Schema{}, fields: map[string]bool{}}
	for name, raw := range files {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return schemaSet{}, fmt.Errorf("schema %s: %w", name, err)
		}
		jsoncheck.CollectFields(doc, set.fields)
		if err := c.AddResource(jsoncheck.BaseURI+name, doc); err != nil {
			return schemaSet{}, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	for name := range files {
		if !isEventSchema(name) {
			continue
		}
		s, err := c.Compile(jsoncheck.BaseURI + name)
		if err != nil {
			return schemaSet{}, fmt.Errorf("compile %s: %w", name, err)
		}
		set.events[strings.TrimSuffix(name, ".json")] = s
	}
	return set, nil
}

// caseVariant finds a key of doc that is not one of the contract's field
// names but equals one when case is ignored. encoding/json reads such a
// key into that field (the last of them wins), while the schema, which
// matches names exactly, never checked it: {"paidAmount": "80.00",
// "PaidAmount": "-5"} would validate and decode as -5.
func (s schemaSet) caseVariant(doc any) (key, field string, found bool) {
	switch v := doc.(type) {
	case map[string]any:
		for k, child := range v {
			if !s.fields[k] {
				for f := range s.fields {
					if strings.EqualFold(k, f) {
						return k, f, true
					}
				}
			}
			if key, field, found = s.caseVariant(child); found {
				return key, field, true
			}
		}
	case []any:
		for _, child := range v {
			if key, field, found = s.caseVariant(child); found {
				return key, field, true
			}
		}
	}
	return "", "", false
}

// isEventSchema tells an event schema ("OrderPaid.v1.json") from the files
// the event schemas reference (envelope.json, rules.json).
func isEventSchema(name string) bool { return strings.Contains(name, ".v") }

// SchemaName is the file name (without .json) of the schema for t and v.
func SchemaName(t Type, version int) string {
	return fmt.Sprintf("%s.v%d", t, version)
}

// Validate checks raw against the schema its eventType and eventVersion name.
func Validate(raw []byte) error {
	_, err := parse(raw, false)
	return err
}

// validateReference is Validate as the generic JSON Schema validator
// evaluates it over three decodes of raw. It is the reference the compiled
// checkers are tested against, and stays the definition of what Validate
// means.
func validateReference(raw []byte) error {
	set, err := compiled()
	if err != nil {
		return fmt.Errorf("load event schemas: %w", err)
	}
	var head struct {
		EventType    Type `json:"eventType"`
		EventVersion int  `json:"eventVersion"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	s, ok := set.events[SchemaName(head.EventType, head.EventVersion)]
	if !ok {
		return &InvalidError{Reason: ReasonUnknownVersion,
			Err: fmt.Errorf("%w: %q v%d", ErrUnknownVersion, head.EventType, head.EventVersion)}
	}
	if err := s.Validate(doc); err != nil {
		return &InvalidError{Reason: ReasonSchemaViolation, Err: err}
	}
	if key, field, found := set.caseVariant(doc); found {
		return &InvalidError{Reason: ReasonSchemaViolation,
			Err: fmt.Errorf("key %q differs from the contract's field %q only in case", key, field)}
	}
	return nil
}

// parseReference is Parse over validateReference.
func parseReference(raw []byte) (Envelope, error) {
	if err := validateReference(raw); err != nil {
		return Envelope{}, err
	}
	var env Envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		return Envelope{}, &InvalidError{Reason: ReasonInvalidJSON, Err: err}
	}
	return env, nil
}
