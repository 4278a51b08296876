// Package jsoncheck compiles the suite's JSON Schemas into checks for
// exactly the keywords they use, and evaluates them over a JSON document
// scanned once: pkg/event parses every event through them, and pkg/rules
// checks a client's values against the same compiled definitions. Every
// keyword it holds is applied as JSON Schema 2020-12 applies it (a test of
// pkg/event keeps it equal to the reference validator over the same
// schemas); a keyword it does not implement stops the compiler instead of
// being ignored.
package jsoncheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// BaseURI is where the suite's schemas say they live: each file's $id is
// BaseURI followed by its name.
const BaseURI = "https://schemas.reliable-orders.dev/"

// Set is schema files compiled to checkers.
type Set struct {
	// Roots is each file's schema, by file name without ".json".
	Roots map[string]*Checker
	// Defs is each file's definitions ($defs), by file name and
	// definition.
	Defs map[string]map[string]*Checker
	// Fields is every property name the files define, and FieldList the
	// same names in order.
	Fields    map[string]bool
	FieldList []string
}

// schemaCompiler turns schema documents into checkers.
type schemaCompiler struct {
	docs map[string]map[string]any // by file name
	done map[string]*Checker       // by file#pointer
}

// Compile compiles files, JSON Schema documents by file name, each with
// the $id BaseURI + its name; a $ref names another of them by file name.
// Every definition compiles, referenced or not, so a keyword the checker
// lacks is refused wherever it is written.
func Compile(files map[string][]byte) (Set, error) {
	c := schemaCompiler{docs: map[string]map[string]any{}, done: map[string]*Checker{}}
	fields := map[string]bool{}
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		dec := json.NewDecoder(bytes.NewReader(files[name]))
		dec.UseNumber()
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return Set{}, fmt.Errorf("schema %s: %w", name, err)
		}
		if id, _ := doc["$id"].(string); id != BaseURI+name {
			return Set{}, fmt.Errorf("schema %s: $id %q, want %q", name, id, BaseURI+name)
		}
		CollectFields(doc, fields)
		c.docs[name] = doc
	}
	set := Set{Roots: map[string]*Checker{}, Defs: map[string]map[string]*Checker{}, Fields: fields,
		FieldList: slices.Sorted(maps.Keys(fields))}
	for _, name := range names {
		root, err := c.compile(name, "")
		if err != nil {
			return Set{}, fmt.Errorf("compile %s: %w", name, err)
		}
		set.Roots[strings.TrimSuffix(name, ".json")] = root
		set.Defs[name] = map[string]*Checker{}
		defs, _ := c.docs[name]["$defs"].(map[string]any)
		for def := range defs {
			ch, err := c.compile(name, "/$defs/"+def)
			if err != nil {
				return Set{}, fmt.Errorf("compile %s#/$defs/%s: %w", name, def, err)
			}
			set.Defs[name][def] = ch
		}
	}
	return set, nil
}

// CollectFields adds the names of every "properties" object of schema, a
// decoded JSON Schema document, to fields.
func CollectFields(schema any, fields map[string]bool) {
	switch v := schema.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name := range props {
				fields[name] = true
			}
		}
		for _, child := range v {
			CollectFields(child, fields)
		}
	case []any:
		for _, child := range v {
			CollectFields(child, fields)
		}
	}
}

// documents keeps the node slices of scanned documents for reuse: every
// consumed message is parsed, and its node slice would otherwise be the
// largest allocation of the parse.
var documents = sync.Pool{New: func() any { return &Document{} }}

// maxPooledNodes bounds the node slice a document keeps for reuse, so one
// huge message does not pin its memory in the pool.
const maxPooledNodes = 4096

// NewDocument returns an empty document to Scan into, from a pool; Release
// gives it back once nothing refers to its nodes.
func NewDocument() *Document { return documents.Get().(*Document) }

// Release empties d and returns it to the pool.
func (d *Document) Release() {
	clear(d.Nodes)
	d.raw, d.Nodes = nil, d.Nodes[:0]
	if cap(d.Nodes) <= maxPooledNodes {
		documents.Put(d)
	}
}

// typeError is what json.Unmarshal says of a value it cannot read into a
// field.
func typeError(n *Node, field string) error {
	return fmt.Errorf("json: cannot unmarshal %s into field %s", KindName(n.Kind), field)
}

// StringField reads n into a string field as json.Unmarshal does: nil for
// null.
func (d *Document) StringField(n *Node, field string) (*string, error) {
	switch n.Kind {
	case KindNull:
		return nil, nil
	case KindString:
		b, err := d.Str(n)
		if err != nil {
			return nil, err
		}
		s := string(b)
		return &s, nil
	}
	return nil, typeError(n, field)
}

// IntField reads n into an integer field of bits bits as json.Unmarshal
// does: nil for null.
func (d *Document) IntField(n *Node, field string, bits int) (*int64, error) {
	switch n.Kind {
	case KindNull:
		return nil, nil
	case KindNumber:
		v, err := strconv.ParseInt(string(d.Bytes(n)), 10, bits)
		if err != nil {
			return nil, fmt.Errorf("json: cannot unmarshal number %s into field %s", d.Bytes(n), field)
		}
		return &v, nil
	}
	return nil, typeError(n, field)
}
