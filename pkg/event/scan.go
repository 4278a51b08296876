package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota + 1
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is one JSON value of a document. The nodes of a document are in
// document order, so a container's first child, if any, follows it and
// next skips its subtree.
type node struct {
	kind kind
	// escaped: a string value holds an escape or a non-ASCII byte, so its
	// bytes are not its value.
	escaped bool
	// key is the decoded name of the member this value is, in an object.
	key []byte
	// start and end bound the value's bytes in the document (quotes
	// included for a string).
	start, end int
	// next is the index of the node that follows this one's subtree.
	next int
}

// document is one event parsed once into nodes. It is reused through
// documents, so it never outlives the call that parsed it.
type document struct {
	raw   []byte
	nodes []node
}

// documents keeps the node slices of parsed events for reuse: every
// consumed message is parsed, and its node slice would otherwise be the
// largest allocation of the parse.
var documents = sync.Pool{New: func() any { return &document{} }}

// scan parses raw, which must already be valid JSON (json.Valid), into
// d's nodes: a scanner that trusts the syntax is a few loops, and the
// syntax check stays encoding/json's, so this reader refuses exactly what
// json.Unmarshal refuses.
func (d *document) scan(raw []byte) error {
	d.raw = raw
	d.nodes = d.nodes[:0]
	_, err := d.value(d.skipSpace(0), nil)
	return err
}

func (d *document) skipSpace(i int) int {
	for i < len(d.raw) {
		switch d.raw[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value reads the value at i, appends its nodes and returns the offset
// after it.
func (d *document) value(i int, key []byte) (int, error) {
	if i >= len(d.raw) {
		return i, fmt.Errorf("unexpected end of JSON at offset %d", i)
	}
	at := len(d.nodes)
	d.nodes = append(d.nodes, node{key: key, start: i})
	var err error
	switch c := d.raw[i]; c {
	case '{':
		d.nodes[at].kind = kindObject
		i, err = d.object(i + 1)
	case '[':
		d.nodes[at].kind = kindArray
		i, err = d.array(i + 1)
	case '"':
		var escaped bool
		i, escaped = d.stringEnd(i)
		d.nodes[at].kind, d.nodes[at].escaped = kindString, escaped
	case 't':
		d.nodes[at].kind, i = kindTrue, i+len("true")
	case 'f':
		d.nodes[at].kind, i = kindFalse, i+len("false")
	case 'n':
		d.nodes[at].kind, i = kindNull, i+len("null")
	default:
		d.nodes[at].kind = kindNumber
		for i < len(d.raw) && isNumberByte(d.raw[i]) {
			i++
		}
	}
	if err != nil {
		return i, err
	}
	d.nodes[at].end = i
	d.nodes[at].next = len(d.nodes)
	return i, nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (d *document) object(i int) (int, error) {
	i = d.skipSpace(i)
	if i < len(d.raw) && d.raw[i] == '}' {
		return i + 1, nil
	}
	for {
		i = d.skipSpace(i)
		start := i
		end, escaped := d.stringEnd(i)
		key, err := d.text(start, end, escaped)
		if err != nil {
			return end, err
		}
		i = d.skipSpace(end)
		i = d.skipSpace(i + 1) // the colon
		if i, err = d.value(i, key); err != nil {
			return i, err
		}
		i = d.skipSpace(i)
		if i >= len(d.raw) {
			return i, fmt.Errorf("unexpected end of JSON at offset %d", i)
		}
		if d.raw[i] == '}' {
			return i + 1, nil
		}
		i++ // the comma
	}
}

func (d *document) array(i int) (int, error) {
	i = d.skipSpace(i)
	if i < len(d.raw) && d.raw[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = d.value(d.skipSpace(i), nil); err != nil {
			return i, err
		}
		i = d.skipSpace(i)
		if i >= len(d.raw) {
			return i, fmt.Errorf("unexpected end of JSON at offset %d", i)
		}
		if d.raw[i] == ']' {
			return i + 1, nil
		}
		i++ // the comma
	}
}

// stringEnd returns the offset after the string whose opening quote is at
// i, and whether it holds an escape or a byte outside ASCII.
func (d *document) stringEnd(i int) (int, bool) {
	escaped := false
	for i++; i < len(d.raw); i++ {
		switch c := d.raw[i]; {
		case c == '\\':
			escaped = true
			i++
		case c == '"':
			return i + 1, escaped
		case c >= 0x80:
			escaped = true
		}
	}
	return i, escaped
}

// text returns the value of the string at raw[start:end]. A plain ASCII
// string is its own bytes; any other is decoded by encoding/json, so an
// escape, an invalid UTF-8 byte or a lone surrogate reads exactly as
// json.Unmarshal reads it.
func (d *document) text(start, end int, escaped bool) ([]byte, error) {
	if !escaped {
		return d.raw[start+1 : end-1], nil
	}
	var s string
	if err := json.Unmarshal(d.raw[start:end], &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// str returns the value of string node n.
func (d *document) str(n *node) ([]byte, error) {
	return d.text(n.start, n.end, n.escaped)
}

// bytes returns n's JSON text.
func (d *document) bytes(n *node) []byte { return d.raw[n.start:n.end] }

// members appends to dst the indexes of the members of object node i in
// document order.
func (d *document) members(dst []int, i int) []int {
	for j := i + 1; j < d.nodes[i].next; j = d.nodes[j].next {
		dst = append(dst, j)
	}
	return dst
}

// overridden reports whether the k-th of the members ms of an object is
// followed by another of the same name: decoding keeps the last of
// them, so the schema never sees the earlier one.
func (d *document) overridden(ms []int, k int) bool {
	for _, j := range ms[k+1:] {
		if bytes.Equal(d.nodes[j].key, d.nodes[ms[k]].key) {
			return true
		}
	}
	return false
}

// member returns the last member of object node i named name, or -1.
func (d *document) member(i int, name string) int {
	found := -1
	for j := i + 1; j < d.nodes[i].next; j = d.nodes[j].next {
		if string(d.nodes[j].key) == name {
			found = j
		}
	}
	return found
}
