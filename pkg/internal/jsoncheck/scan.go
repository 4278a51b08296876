package jsoncheck

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Kind is the JSON type of a node.
type Kind uint8

// The kinds of JSON values.
const (
	KindNull Kind = iota + 1
	KindFalse
	KindTrue
	KindNumber
	KindString
	KindArray
	KindObject
)

// Node is one JSON value of a document. The nodes of a document are in
// document order, so a container's first child, if any, follows it and
// next skips its subtree.
type Node struct {
	Kind Kind
	// escaped: a string value holds an escape or a non-ASCII byte, so its
	// bytes are not its value.
	escaped bool
	// Key is the decoded name of the member this value is, in an object.
	Key []byte
	// start and end bound the value's bytes in the document (quotes
	// included for a string).
	start, end int
	// Next is the index of the node that follows this one's subtree.
	Next int
}

// Document is one JSON document scanned once into nodes. It is reused
// through a pool (NewDocument, Release), so it never outlives the call
// that scanned it.
type Document struct {
	raw   []byte
	Nodes []Node
}

// Scan parses raw, which must already be valid JSON (json.Valid), into
// d's nodes: a scanner that trusts the syntax is a few loops, and the
// syntax check stays encoding/json's, so this reader refuses exactly what
// json.Unmarshal refuses.
func (d *Document) Scan(raw []byte) error {
	d.raw = raw
	d.Nodes = d.Nodes[:0]
	_, err := d.value(d.skipSpace(0), nil)
	return err
}

func (d *Document) skipSpace(i int) int {
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
func (d *Document) value(i int, key []byte) (int, error) {
	if i >= len(d.raw) {
		return i, fmt.Errorf("unexpected end of JSON at offset %d", i)
	}
	at := len(d.Nodes)
	d.Nodes = append(d.Nodes, Node{Key: key, start: i})
	var err error
	switch c := d.raw[i]; c {
	case '{':
		d.Nodes[at].Kind = KindObject
		i, err = d.object(i + 1)
	case '[':
		d.Nodes[at].Kind = KindArray
		i, err = d.array(i + 1)
	case '"':
		var escaped bool
		i, escaped = d.stringEnd(i)
		d.Nodes[at].Kind, d.Nodes[at].escaped = KindString, escaped
	case 't':
		d.Nodes[at].Kind, i = KindTrue, i+len("true")
	case 'f':
		d.Nodes[at].Kind, i = KindFalse, i+len("false")
	case 'n':
		d.Nodes[at].Kind, i = KindNull, i+len("null")
	default:
		d.Nodes[at].Kind = KindNumber
		for i < len(d.raw) && isNumberByte(d.raw[i]) {
			i++
		}
	}
	if err != nil {
		return i, err
	}
	d.Nodes[at].end = i
	d.Nodes[at].Next = len(d.Nodes)
	return i, nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (d *Document) object(i int) (int, error) {
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

func (d *Document) array(i int) (int, error) {
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
func (d *Document) stringEnd(i int) (int, bool) {
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
func (d *Document) text(start, end int, escaped bool) ([]byte, error) {
	if !escaped {
		return d.raw[start+1 : end-1], nil
	}
	var s string
	if err := json.Unmarshal(d.raw[start:end], &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// Str returns the value of string node n.
func (d *Document) Str(n *Node) ([]byte, error) {
	return d.text(n.start, n.end, n.escaped)
}

// Bytes returns n's JSON text.
func (d *Document) Bytes(n *Node) []byte { return d.raw[n.start:n.end] }

// Members appends to dst the indexes of the members of object node i in
// document order.
func (d *Document) Members(dst []int, i int) []int {
	for j := i + 1; j < d.Nodes[i].Next; j = d.Nodes[j].Next {
		dst = append(dst, j)
	}
	return dst
}

// Overridden reports whether the k-th of the members ms of an object is
// followed by another of the same name: decoding keeps the last of
// them, so the schema never sees the earlier one.
func (d *Document) Overridden(ms []int, k int) bool {
	for _, j := range ms[k+1:] {
		if bytes.Equal(d.Nodes[j].Key, d.Nodes[ms[k]].Key) {
			return true
		}
	}
	return false
}

// member returns the last member of object node i named name, or -1.
func (d *Document) member(i int, name string) int {
	found := -1
	for j := i + 1; j < d.Nodes[i].Next; j = d.Nodes[j].Next {
		if string(d.Nodes[j].Key) == name {
			found = j
		}
	}
	return found
}
