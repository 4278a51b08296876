package event

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas holds one JSON Schema per (eventType, eventVersion), named
// "<EventType>.v<N>.json", plus the shared envelope.json and rules.json
// (the value rules, rules.go).
//
//go:embed schemas/*.json
var Schemas embed.FS

const schemaBase = "https://schemas.reliable-orders.dev/"

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

// schemaSet is every compiled schema: the event schemas by SchemaName and
// the value rules of rules.json by definition name.
type schemaSet struct {
	events map[string]*jsonschema.Schema
	rules  map[string]*jsonschema.Schema
	// fields is every property name the schemas define.
	fields map[string]bool
}

func compileSchemas() (schemaSet, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	names, err := fs.Glob(Schemas, "schemas/*.json")
	if err != nil {
		return schemaSet{}, err
	}
	fields := map[string]bool{}
	for _, name := range names {
		raw, err := Schemas.ReadFile(name)
		if err != nil {
			return schemaSet{}, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return schemaSet{}, fmt.Errorf("schema %s: %w", name, err)
		}
		collectFields(doc, fields)
		if err := c.AddResource(schemaBase+path.Base(name), doc); err != nil {
			return schemaSet{}, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	set := schemaSet{events: map[string]*jsonschema.Schema{}, rules: map[string]*jsonschema.Schema{}, fields: fields}
	for _, name := range names {
		base := path.Base(name)
		if !isEventSchema(base) {
			continue
		}
		s, err := c.Compile(schemaBase + base)
		if err != nil {
			return schemaSet{}, fmt.Errorf("compile %s: %w", base, err)
		}
		set.events[strings.TrimSuffix(base, ".json")] = s
	}
	for _, def := range ruleNames() {
		s, err := c.Compile(schemaBase + rulesFile + "#/$defs/" + def)
		if err != nil {
			return schemaSet{}, fmt.Errorf("compile rule %s: %w", def, err)
		}
		set.rules[def] = s
	}
	return set, nil
}

// collectFields adds the names of every "properties" object of schema to
// fields.
func collectFields(schema any, fields map[string]bool) {
	switch v := schema.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name := range props {
				fields[name] = true
			}
		}
		for _, child := range v {
			collectFields(child, fields)
		}
	case []any:
		for _, child := range v {
			collectFields(child, fields)
		}
	}
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

// checkRuleReference is what ValidateID and the other value rule
// functions answer for v, a value as JSON decodes it (string,
// json.Number), when the generic JSON Schema validator evaluates
// definition rule: the reference their compiled checks are tested
// against. got is how a refused value is quoted back.
func checkRuleReference(field, rule string, v any, got string) error {
	set, err := compiled()
	if err != nil {
		return fmt.Errorf("load value rules: %w", err)
	}
	if set.rules[rule].Validate(v) == nil {
		return nil
	}
	return refuse(field, rule, got)
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
