package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Checker is one schema compiled for the keywords the suite's schemas use.
// Every keyword it holds is applied as JSON Schema 2020-12 applies it,
// which a test keeps equal to the reference validator over the same
// schemas; a keyword it does not implement stops the compiler instead of
// being ignored.
type Checker struct {
	types    typeSet
	constant *constant
	required []string
	props    []property
	items    *Checker
	refs     []*Checker

	minLength, maxLength int // -1: none
	minItems, maxItems   int // -1: none
	minimum, maximum     *bound
	pattern              *regexp.Regexp
	// match is pattern's hand-written matcher, when it has one.
	match    func([]byte) bool
	dateTime bool

	// readsText and readsNumber say whether a keyword of ch or of a
	// schema it refers to needs a string's value or a number's, so a
	// value nothing looks at is not decoded.
	readsText, readsNumber bool
}

type property struct {
	name  string
	Check *Checker
}

// typeSet is a set of JSON Schema types.
type typeSet uint8

const (
	typeNull typeSet = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

// typeNames are the JSON Schema type names, in typeSet's bit order.
func typeNames() [7]string {
	return [...]string{"null", "boolean", "number", "integer", "string", "array", "object"}
}

// typeNamed returns the type called name.
func typeNamed(name string) (typeSet, bool) {
	for i, n := range typeNames() {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// constant is the value of a const keyword: a string or a number, the
// only kinds the compiler takes.
type constant struct {
	str []byte
	num *big.Rat
}

// bound is a minimum or maximum, kept as an int64 too when it is one, so
// the usual integer is compared without big.Rat.
type bound struct {
	rat   *big.Rat
	small int64
	isInt bool
}

// violation says where and why a value breaks its schema.
type violation struct {
	at  []string // reversed: innermost first
	msg string
}

func (v *violation) Error() string {
	var b strings.Builder
	for i := len(v.at) - 1; i >= 0; i-- {
		b.WriteString("/")
		b.WriteString(v.at[i])
	}
	if b.Len() == 0 {
		b.WriteString("/")
	}
	return "at " + b.String() + ": " + v.msg
}

func within(err error, at string) error {
	var v *violation
	if errors.As(err, &v) {
		v.at = append(v.at, at)
	}
	return err
}

// compile returns the checker of the schema at pointer ptr of file.
func (c *schemaCompiler) compile(file, ptr string) (*Checker, error) {
	loc := file + "#" + ptr
	if ch, ok := c.done[loc]; ok {
		if ch == nil {
			return nil, fmt.Errorf("%s refers to itself", loc)
		}
		return ch, nil
	}
	doc, ok := c.docs[file]
	if !ok {
		return nil, fmt.Errorf("no schema %s", file)
	}
	var at any = doc
	if ptr != "" {
		for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
			m, ok := at.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: no such schema", loc)
			}
			if at, ok = m[tok]; !ok {
				return nil, fmt.Errorf("%s: no such schema", loc)
			}
		}
	}
	c.done[loc] = nil
	ch, err := c.build(file, at)
	if err != nil {
		return nil, err
	}
	c.done[loc] = ch
	return ch, nil
}

// build compiles schema s, found in file.
func (c *schemaCompiler) build(file string, s any) (*Checker, error) {
	m, ok := s.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %v is not an object", s)
	}
	ch := &Checker{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := c.keyword(ch, file, k, m[k]); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	ch.readsText = ch.constant != nil && ch.constant.str != nil ||
		ch.minLength >= 0 || ch.maxLength >= 0 || ch.pattern != nil || ch.dateTime
	ch.readsNumber = ch.types&(typeInteger|typeNumber) != 0 || ch.constant != nil ||
		ch.minimum != nil || ch.maximum != nil
	for _, r := range ch.refs {
		// A reference is compiled before the schema that makes it.
		ch.readsText = ch.readsText || r.readsText
		ch.readsNumber = ch.readsNumber || r.readsNumber
	}
	return ch, nil
}

func (c *schemaCompiler) keyword(ch *Checker, file, k string, v any) error {
	var err error
	switch k {
	case "$schema", "$id", "title", "description", "$defs":
		// Annotations, and definitions that compile where they are used.
	case "type":
		ch.types, err = types(v)
	case "const":
		ch.constant, err = newConstant(v)
	case "required":
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("not an array")
		}
		for _, name := range list {
			s, ok := name.(string)
			if !ok {
				return fmt.Errorf("%v is not a string", name)
			}
			ch.required = append(ch.required, s)
		}
	case "properties":
		props, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("not an object")
		}
		for name, sub := range props {
			pc, err := c.build(file, sub)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			ch.props = append(ch.props, property{name: name, Check: pc})
		}
		slices.SortFunc(ch.props, func(a, b property) int { return strings.Compare(a.name, b.name) })
	case "items":
		ch.items, err = c.build(file, v)
	case "$ref":
		ref, ok := v.(string)
		if !ok {
			return fmt.Errorf("not a string")
		}
		target, ptr, _ := strings.Cut(strings.TrimPrefix(ref, BaseURI), "#")
		if target == "" {
			target = file
		}
		r, err := c.compile(target, ptr)
		if err != nil {
			return err
		}
		ch.refs = append(ch.refs, r)
	case "minLength":
		ch.minLength, err = count(v)
	case "maxLength":
		ch.maxLength, err = count(v)
	case "minItems":
		ch.minItems, err = count(v)
	case "maxItems":
		ch.maxItems, err = count(v)
	case "minimum":
		ch.minimum, err = newBound(v)
	case "maximum":
		ch.maximum, err = newBound(v)
	case "pattern":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("not a string")
		}
		ch.pattern, err = regexp.Compile(s)
		ch.match = Matcher(s)
	case "format":
		if v != "date-time" {
			return fmt.Errorf("format %v is not implemented", v)
		}
		ch.dateTime = true
	default:
		return errors.New("keyword not implemented by the checker")
	}
	return err
}

func types(v any) (typeSet, error) {
	var list []any
	switch v := v.(type) {
	case string:
		list = []any{v}
	case []any:
		list = v
	default:
		return 0, fmt.Errorf("%v is not a type", v)
	}
	var set typeSet
	for _, name := range list {
		s, _ := name.(string)
		t, ok := typeNamed(s)
		if !ok {
			return 0, fmt.Errorf("%v is not a type", name)
		}
		set |= t
	}
	return set, nil
}

func newConstant(v any) (*constant, error) {
	switch v := v.(type) {
	case string:
		return &constant{str: []byte(v)}, nil
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		if !ok {
			return nil, fmt.Errorf("%v is not a number", v)
		}
		return &constant{num: r}, nil
	}
	return nil, fmt.Errorf("a const of %T is not implemented", v)
}

func count(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	i, err := strconv.Atoi(string(n))
	if err != nil || i < 0 {
		return 0, fmt.Errorf("%v is not a count", v)
	}
	return i, nil
}

func newBound(v any) (*bound, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%v is not a number", v)
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil, fmt.Errorf("%v is not a number", v)
	}
	b := &bound{rat: r}
	if r.IsInt() && r.Num().IsInt64() {
		b.small, b.isInt = r.Num().Int64(), true
	}
	return b, nil
}

// number is a JSON number as the schema keywords compare it: an int64
// when its text is a short run of digits, else a big.Rat as the reference
// validator reads it (nil when even that cannot read it).
type number struct {
	small   int64
	isSmall bool
	rat     *big.Rat
}

func readNumber(text []byte) number {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 0 && len(digits) <= 18 {
		plain := true
		for _, c := range digits {
			if c < '0' || c > '9' {
				plain = false
				break
			}
		}
		if plain {
			n, err := strconv.ParseInt(string(text), 10, 64)
			if err == nil {
				return number{small: n, isSmall: true}
			}
		}
	}
	r, ok := new(big.Rat).SetString(string(text))
	if !ok {
		return number{}
	}
	return number{rat: r}
}

func (n number) isInteger() bool { return n.isSmall || n.rat != nil && n.rat.IsInt() }

// cmp compares n with b; n must be readable.
func (n number) cmp(b *bound) int {
	if n.isSmall && b.isInt {
		switch {
		case n.small < b.small:
			return -1
		case n.small > b.small:
			return 1
		}
		return 0
	}
	return n.asRat().Cmp(b.rat)
}

func (n number) asRat() *big.Rat {
	if n.isSmall {
		return new(big.Rat).SetInt64(n.small)
	}
	return n.rat
}

// Check evaluates ch over node i of d.
func (ch *Checker) Check(d *Document, i int) error {
	n := &d.Nodes[i]
	switch n.Kind {
	case KindString:
		var s []byte
		if ch.readsText {
			var err error
			if s, err = d.Str(n); err != nil {
				return err
			}
		}
		return ch.CheckString(s)
	case KindNumber:
		var num number
		if ch.readsNumber {
			num = readNumber(d.Bytes(n))
		}
		return ch.checkNumber(num)
	}
	if ch.types != 0 && !ch.hasType(n.Kind, number{}) {
		return ch.typeViolation(n.Kind)
	}
	if ch.constant != nil {
		// A const is a string or a number, which no other value equals.
		return &violation{msg: "value is not the schema's const"}
	}
	switch n.Kind {
	case KindArray:
		if err := ch.checkArray(d, i); err != nil {
			return err
		}
	case KindObject:
		if err := ch.checkObject(d, i); err != nil {
			return err
		}
	}
	for _, r := range ch.refs {
		if err := r.Check(d, i); err != nil {
			return err
		}
	}
	return nil
}

// CheckString evaluates ch over a string whose value is s; s may be nil
// when !ch.readsText, as no keyword then looks at it. A value rule is
// checked through it too (pkg/rules), so a service and a consumer apply
// the very same compiled rule.
func (ch *Checker) CheckString(s []byte) error {
	if ch.types != 0 && !ch.hasType(KindString, number{}) {
		return ch.typeViolation(KindString)
	}
	if ch.constant != nil && !ch.constant.equalsText(s) {
		return &violation{msg: "value is not the schema's const"}
	}
	if ch.minLength >= 0 || ch.maxLength >= 0 {
		length := utf8.RuneCount(s)
		if ch.minLength >= 0 && length < ch.minLength {
			return &violation{msg: fmt.Sprintf("length %d is below the minimum %d", length, ch.minLength)}
		}
		if ch.maxLength >= 0 && length > ch.maxLength {
			return &violation{msg: fmt.Sprintf("length %d is above the maximum %d", length, ch.maxLength)}
		}
	}
	if ch.pattern != nil && !ch.matches(s) {
		return &violation{msg: fmt.Sprintf("does not match %s", ch.pattern)}
	}
	if ch.dateTime {
		if err := validDateTime(string(s)); err != nil {
			return &violation{msg: "not a date-time: " + err.Error()}
		}
	}
	for _, r := range ch.refs {
		if err := r.CheckString(s); err != nil {
			return err
		}
	}
	return nil
}

// CheckInt evaluates ch over the integer n: a value rule over a number
// (pkg/rules' quantity).
func (ch *Checker) CheckInt(n int64) error {
	return ch.checkNumber(number{small: n, isSmall: true})
}

// checkNumber evaluates ch over a number; num may be the zero number
// when !ch.readsNumber, as no keyword then looks at it. A value rule is
// checked through it too (pkg/rules).
func (ch *Checker) checkNumber(num number) error {
	if ch.types != 0 && !ch.hasType(KindNumber, num) {
		return ch.typeViolation(KindNumber)
	}
	if ch.constant != nil && !ch.constant.equalsNumber(num) {
		return &violation{msg: "value is not the schema's const"}
	}
	if ch.minimum != nil || ch.maximum != nil {
		if !num.isSmall && num.rat == nil {
			return &violation{msg: "number out of range"}
		}
		if ch.minimum != nil && num.cmp(ch.minimum) < 0 {
			return &violation{msg: "below the minimum " + ch.minimum.rat.RatString()}
		}
		if ch.maximum != nil && num.cmp(ch.maximum) > 0 {
			return &violation{msg: "above the maximum " + ch.maximum.rat.RatString()}
		}
	}
	for _, r := range ch.refs {
		if err := r.checkNumber(num); err != nil {
			return err
		}
	}
	return nil
}

// hasType reports whether a value of kind k (num, when a number) is of
// one of ch's types.
func (ch *Checker) hasType(k Kind, num number) bool {
	switch k {
	case KindNull:
		return ch.types&typeNull != 0
	case KindTrue, KindFalse:
		return ch.types&typeBoolean != 0
	case KindNumber:
		return ch.types&typeNumber != 0 || ch.types&typeInteger != 0 && num.isInteger()
	case KindString:
		return ch.types&typeString != 0
	case KindArray:
		return ch.types&typeArray != 0
	}
	return ch.types&typeObject != 0
}

func (ch *Checker) typeViolation(k Kind) error {
	return &violation{msg: fmt.Sprintf("got %s, want %s", KindName(k), ch.typeNames())}
}

func (ch *Checker) typeNames() string {
	var names []string
	for i, name := range typeNames() {
		if ch.types&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}

// KindName is the JSON Schema type name of kind k, as messages say it.
func KindName(k Kind) string {
	switch k {
	case KindNull:
		return "null"
	case KindFalse, KindTrue:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	}
	return "object"
}

// equalsText reports whether c is the string s.
func (c *constant) equalsText(s []byte) bool {
	return c.str != nil && bytes.Equal(s, c.str)
}

// equalsNumber reports whether c is the number num.
func (c *constant) equalsNumber(num number) bool {
	switch {
	case c.num == nil:
		return false
	case num.isSmall:
		return c.num.IsInt() && c.num.Num().IsInt64() && c.num.Num().Int64() == num.small
	}
	return num.rat != nil && num.rat.Cmp(c.num) == 0
}

func (ch *Checker) matches(s []byte) bool {
	if ch.match != nil {
		return ch.match(s)
	}
	return ch.pattern.Match(s)
}

func (ch *Checker) checkArray(d *Document, i int) error {
	if ch.minItems < 0 && ch.maxItems < 0 && ch.items == nil {
		return nil
	}
	k := 0
	for j := i + 1; j < d.Nodes[i].Next; j = d.Nodes[j].Next {
		if ch.items != nil {
			if err := ch.items.Check(d, j); err != nil {
				return within(err, strconv.Itoa(k))
			}
		}
		k++
	}
	if ch.minItems >= 0 && k < ch.minItems {
		return &violation{msg: fmt.Sprintf("%d items, at least %d wanted", k, ch.minItems)}
	}
	if ch.maxItems >= 0 && k > ch.maxItems {
		return &violation{msg: fmt.Sprintf("%d items, at most %d wanted", k, ch.maxItems)}
	}
	return nil
}

func (ch *Checker) checkObject(d *Document, i int) error {
	for _, name := range ch.required {
		if d.member(i, name) < 0 {
			return &violation{msg: fmt.Sprintf("missing property %q", name)}
		}
	}
	for _, p := range ch.props {
		j := d.member(i, p.name)
		if j < 0 {
			continue
		}
		if err := p.Check.Check(d, j); err != nil {
			return within(err, p.name)
		}
	}
	return nil
}

// validDateTime is format "date-time" as the reference validator asserts
// it (RFC 3339 section 5.6, leap seconds included).
func validDateTime(s string) error {
	if len(s) < 20 {
		return errors.New("less than 20 characters long")
	}
	if s[10] != 't' && s[10] != 'T' {
		return errors.New("11th character must be t or T")
	}
	if _, err := time.Parse("2006-01-02", s[:10]); err != nil {
		return fmt.Errorf("invalid date element: %w", err)
	}
	return validTime(s[11:])
}

func validTime(str string) error {
	if len(str) < 9 {
		return errors.New("less than 9 characters long")
	}
	if str[2] != ':' || str[5] != ':' {
		return errors.New("missing colon in correct place")
	}
	var hms [3]int
	for k, tok := range strings.SplitN(str[:8], ":", 3) {
		i, err := strconv.Atoi(tok)
		if err != nil {
			return errors.New("invalid hour/min/sec")
		}
		if i < 0 {
			return errors.New("non-positive hour/min/sec")
		}
		hms[k] = i
	}
	h, m, s := hms[0], hms[1], hms[2]
	if h > 23 || m > 59 || s > 60 {
		return errors.New("hour/min/sec out of range")
	}
	str = str[8:]
	if rem, ok := strings.CutPrefix(str, "."); ok {
		digits := 0
		for _, ch := range rem {
			if ch < '0' || ch > '9' {
				break
			}
			digits++
		}
		if digits == 0 {
			return errors.New("no digits in second fraction")
		}
		str = rem[digits:]
	}
	if str != "z" && str != "Z" {
		if len(str) != 6 {
			return errors.New("offset must be 6 characters long")
		}
		var sign int
		switch str[0] {
		case '+':
			sign = -1
		case '-':
			sign = +1
		default:
			return errors.New("offset must begin with plus/minus")
		}
		str = str[1:]
		if str[2] != ':' {
			return errors.New("missing colon in offset in correct place")
		}
		var zhm [2]int
		for k, tok := range strings.SplitN(str, ":", 2) {
			i, err := strconv.Atoi(tok)
			if err != nil {
				return errors.New("invalid hour/min in offset")
			}
			if i < 0 {
				return errors.New("non-positive hour/min in offset")
			}
			zhm[k] = i
		}
		zh, zm := zhm[0], zhm[1]
		if zh > 23 || zm > 59 {
			return errors.New("hour/min in offset out of range")
		}
		hm := (h*60 + m) + sign*(zh*60+zm)
		if hm < 0 {
			hm += 24 * 60
		}
		h, m = hm/60, hm%60
	}
	if s >= 60 && (h != 23 || m != 59) {
		return errors.New("invalid leap second")
	}
	return nil
}
