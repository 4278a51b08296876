package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// reasonOf is the Reason of an *InvalidError, "accepted" for nil and
// "not an *InvalidError" for any other error.
func reasonOf(err error) string {
	if err == nil {
		return "accepted"
	}
	var inv *event.InvalidError
	if !errors.As(err, &inv) {
		return "not an *InvalidError: " + err.Error()
	}
	return inv.Reason
}

// sameDecoded compares two envelopes exactly, the payload byte for byte.
func sameDecoded(a, b event.Envelope) bool {
	return a.EventID == b.EventID && a.EventType == b.EventType && a.EventVersion == b.EventVersion &&
		a.OccurredAt.Equal(b.OccurredAt) && a.OccurredAt.Location().String() == b.OccurredAt.Location().String() &&
		a.AggregateID == b.AggregateID && a.AggregateVersion == b.AggregateVersion &&
		a.TraceID == b.TraceID && a.Producer == b.Producer && bytes.Equal(a.Data, b.Data)
}

// agreeWithReference fails t unless Parse and Validate answer raw as the
// generic JSON Schema validator does: the same verdict, the same Reason
// and, when accepted, the same envelope.
func agreeWithReference(t *testing.T, raw []byte) {
	t.Helper()
	want, wantErr := event.ParseReference(raw)
	got, gotErr := event.Parse(raw)
	if reasonOf(gotErr) != reasonOf(wantErr) {
		t.Fatalf("Parse(%s)\n= %v\nthe reference: %v", raw, gotErr, wantErr)
	}
	if gotErr == nil && !sameDecoded(got, want) {
		t.Fatalf("Parse(%s)\n= %+v\nthe reference: %+v", raw, got, want)
	}
	if v, ref := event.Validate(raw), event.ValidateReference(raw); reasonOf(v) != reasonOf(ref) {
		t.Fatalf("Validate(%s)\n= %v\nthe reference: %v", raw, v, ref)
	}
}

// wrongValues replace a field in the mutated corpus: every JSON type,
// boundaries of the rules, numbers spelled as integers are not, and
// strings counted in code points.
func wrongValues() []any {
	return []any{
		nil, true, false, json.Number("0"), json.Number("1"), json.Number("-1"), json.Number("2"),
		json.Number("1.0"), json.Number("1e0"), json.Number("10e-1"), json.Number("1.5"), json.Number("-0"),
		json.Number("1000000"), json.Number("1000001"), json.Number("1000000.0"), json.Number("9223372036854775807"),
		json.Number("9223372036854775808"), json.Number("1e400"), json.Number("1E2"), json.Number("0.1e1"),
		"", "x", "0", "80.00", "0.00", "0.01", "01.5", "1.005", "9999999999999999.99", "10000000000000000",
		"CNY", "cny", "EURO", "SKU 1", "O/1", strings.Repeat("i", 128), strings.Repeat("i", 129),
		strings.Repeat("é", 500), strings.Repeat("é", 501), strings.Repeat("x", 500), strings.Repeat("😀", 501),
		"ИД", "line\nbreak", "\u2028", "\ufffd",
		"2026-08-10T02:00:00Z", "2026-08-10t02:00:00z", "2026-08-10T02:00:00.5Z", "2026-08-10T02:00:00.Z",
		"2026-08-10T23:59:60Z", "2026-08-10T02:00:60Z", "2026-12-31T23:59:60Z", "2026-02-30T02:00:00Z",
		"2026-08-10T24:00:00Z", "2026-08-10T02:00:00+00:00", "2026-08-10T02:00:00+08:00Z", "2026-08-10 02:00:00Z",
		"0000-01-01T00:00:00Z", "2026-08-10T02:00:00.123456789123Z", "+2026-08-10T02:00:00Z",
		"4bf92f3577b34da6", "4BF92F3577B34DA6", strings.Repeat("a", 15), strings.Repeat("a", 33),
		"OrderPaid", "OrderRefunded",
		[]any{}, []any{json.Number("1"), "x"}, map[string]any{}, map[string]any{"a": []any{map[string]any{"b": nil}}},
		[]any{map[string]any{"sku": "S", "quantity": json.Number("1")}},
		[]any{map[string]any{"sku": "S", "quantity": json.Number("1.0")}},
		[]any{map[string]any{"sku": "S", "quantity": json.Number("1"), "Quantity": json.Number("0")}},
		[]any{map[string]any{"sku": "S", "quantity": json.Number("1"), "extra": map[string]any{"SKU": 1}}},
	}
}

// decodeObject reads raw into a map that keeps numbers as written.
func decodeObject(tb testing.TB, raw []byte) map[string]any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// clone deep-copies a decoded JSON value.
func clone(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = clone(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = clone(x)
		}
		return s
	}
	return v
}

// mutations returns variants of one valid event: at the envelope, its
// payload and its first item, each field removed, replaced by each wrong
// value, doubled by a key differing in case, and each object given extra
// fields.
func mutations(tb testing.TB, raw []byte) [][]byte {
	tb.Helper()
	var out [][]byte
	add := func(m map[string]any) {
		b, err := json.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	// objects returns the mutable objects of a fresh copy: the envelope,
	// its payload, and the first element of each array in the payload.
	objects := func() (map[string]any, []map[string]any) {
		root := clone(decodeObject(tb, raw)).(map[string]any)
		list := []map[string]any{root}
		if data, ok := root["data"].(map[string]any); ok {
			list = append(list, data)
			for _, k := range slices.Sorted(mapKeys(data)) {
				if arr, ok := data[k].([]any); ok && len(arr) > 0 {
					if item, ok := arr[0].(map[string]any); ok {
						list = append(list, item)
					}
				}
			}
		}
		return root, list
	}
	_, shape := objects()
	for o := range shape {
		for _, key := range slices.Sorted(mapKeys(shape[o])) {
			root, objs := objects()
			delete(objs[o], key)
			add(root)
			for _, v := range wrongValues() {
				root, objs := objects()
				objs[o][key] = clone(v)
				add(root)
			}
			for _, variant := range caseVariants(key) {
				root, objs := objects()
				objs[o][variant] = objs[o][key]
				add(root)
				root, objs = objects()
				objs[o][variant] = "-5"
				add(root)
				root, objs = objects()
				objs[o][variant] = objs[o][key]
				delete(objs[o], key)
				add(root)
			}
		}
		for _, extra := range []any{nil, "x", map[string]any{"eventId": "bad id!", "deep": []any{map[string]any{"QUANTITY": 1}}}} {
			root, objs := objects()
			objs[o]["extra"] = clone(extra)
			add(root)
		}
	}
	return out
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// caseVariants are names json.Unmarshal reads into field name though they
// differ from it: upper case, a capital first letter, and the Kelvin sign
// and long s, which fold to k and s.
func caseVariants(name string) []string {
	out := []string{strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]}
	if strings.ContainsAny(name, "kK") {
		out = append(out, strings.NewReplacer("k", "\u212a", "K", "\u212a").Replace(name))
	}
	if strings.ContainsAny(name, "sS") {
		out = append(out, strings.NewReplacer("s", "\u017f", "S", "\u017f").Replace(name))
	}
	return out
}

// textMutations edit the bytes of a valid event where a map cannot:
// syntax json.Unmarshal refuses, repeated keys, escapes and invalid UTF-8.
func textMutations(raw []byte) [][]byte {
	s := string(raw)
	edits := []string{
		s + " ", s + "x", s + "{}", " \n" + s, s[:len(s)-1], s[:len(s)/2], "", "null", "[]", "1", `"x"`, "true",
		"{}", `{"eventType":"OrderPaid","eventVersion":1}`, `{"eventType":null,"eventVersion":null}`,
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":01`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":1.0`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":1e0`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":9`, 1),
		strings.Replace(s, `"eventVersion":2`, `"eventVersion":1`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":"1"`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":[1]`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":-1`, 1),
		strings.Replace(s, `"eventVersion":1`, `"eventVersion":99999999999999999999`, 1),
		strings.Replace(s, `"aggregateVersion":`, `"aggregateVersion":1.0,"aggregateVersion":`, 1),
		strings.Replace(s, `"aggregateVersion":`, `"aggregateVersion":"x","aggregateVersion":`, 1),
		strings.Replace(s, `{`, `{"eventVersion":"x",`, 1),
		strings.Replace(s, `{`, `{"EventVersion":"x",`, 1),
		strings.Replace(s, `{`, `{"eventVersion":9,`, 1),
		s[:len(s)-1] + `,"eventVersion":9}`,
		s[:len(s)-1] + `,"EVENTVERSION":9}`,
		s[:len(s)-1] + `,"EventType":"OrderShipped"}`,
		s[:len(s)-1] + `,"eventType":null}`,
		s[:len(s)-1] + `,"eventVersion":null}`,
		s[:len(s)-1] + `,"occurredAt":null}`,
		s[:len(s)-1] + `,"aggregateVersion":null}`,
		s[:len(s)-1] + `,"data":null}`,
		strings.Replace(s, `"data":`, `"data":null,"data":`, 1),
		strings.Replace(s, `"data":`, `"data":{"x":1},"data":`, 1),
		strings.Replace(s, `"data":{`, `"data":{"paymentId":"bad id!",`, 1),
		strings.Replace(s, `"data":{`, `"data":{"PAYMENTID":"P-1","x":{"PaidAmount":1},"x":1,`, 1),
		strings.Replace(s, `"data":{`, `"data":{"x":{"PaidAmount":1},"x":1,`, 1),
		strings.Replace(s, `"data":{`, `"data":{"x":1,"x":{"PaidAmount":1},`, 1),
		strings.Replace(s, `"eventId"`, `"event\u0049d"`, 1),
		strings.Replace(s, `"eventId"`, `"eventID"`, 1),
		strings.Replace(s, `"producer":"`, `"producer":"\u00e9\ud800\udc00\ud800x`, 1),
		strings.Replace(s, `"producer":"`, "\"producer\":\"\xff\xfe", 1),
		strings.Replace(s, `"producer":"`, "\"producer\":\"\x01", 1),
		strings.Replace(s, `"producer":"`, `"producer":"\"\\\/\b\f\n\r\t`, 1),
		strings.Replace(s, `"producer":"`, `"producer":"\x`, 1),
		strings.Replace(s, `"traceId":"`, `"traceId":"\u0034`, 1),
		strings.Replace(s, `"customerId":"`, "\"customerId\":\"\xc3", 1),
		strings.Replace(s, `"customerId":"`, "\"customer\xffId\":\"", 1),
		strings.ReplaceAll(s, `:`, ` : `),
		strings.ReplaceAll(s, `,`, " ,\t"),
		strings.Replace(s, `"data":{`, `"data":{"deep":`+strings.Repeat("[", 400)+strings.Repeat("]", 400)+`,`, 1),
		strings.Replace(s, `"data":{`, `"data":{"deep":`+strings.Repeat("[", 10001)+strings.Repeat("]", 10001)+`,`, 1),
		strings.Replace(s, `"2026-08-10T02:00:00`, `"2026-08-10T23:59:60`, 1),
		strings.Replace(s, `Z"`, `z"`, 1),
	}
	out := make([][]byte, len(edits))
	for i, e := range edits {
		out[i] = []byte(e)
	}
	return out
}

// validEvents is every valid event the package's examples and testdata
// hold.
func validEvents(tb testing.TB) [][]byte {
	tb.Helper()
	out := examples(tb)
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 2)
		if len(lines) < 2 {
			continue
		}
		var s string
		if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(lines[1], "[]byte(")), "%q", &s); err == nil {
			out = append(out, []byte(s))
		}
	}
	return out
}

// agreementCorpus is the valid events with their mutations.
func agreementCorpus(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	for _, raw := range validEvents(tb) {
		out = append(out, raw)
		if json.Valid(raw) && bytes.HasPrefix(raw, []byte("{")) {
			out = append(out, mutations(tb, raw)...)
		}
		out = append(out, textMutations(raw)...)
	}
	return out
}

func TestParseAgreesWithTheReferenceValidator(t *testing.T) {
	corpus := agreementCorpus(t)
	accepted := 0
	for _, raw := range corpus {
		agreeWithReference(t, raw)
		if _, err := event.Parse(raw); err == nil {
			accepted++
		}
	}
	// The corpus must exercise both answers, or agreement proves little.
	if accepted < 50 || len(corpus)-accepted < 1000 {
		t.Fatalf("%d of %d inputs accepted", accepted, len(corpus))
	}
}

// FuzzParseAgreesWithSchemas: Parse and Validate, which evaluate the
// schemas compiled to checkers over one scan, answer every input as the
// generic JSON Schema validator does over the same schemas: the same
// verdict, the same Reason and the same envelope.
func FuzzParseAgreesWithSchemas(f *testing.F) {
	// Every 16th input of the corpus seeds it: the agreement test above
	// checks all of them on every run, and the seeds only give the fuzzer
	// a start, so running the whole corpus twice would only cost time.
	for i, raw := range agreementCorpus(f) {
		if i%16 == 0 {
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) { agreeWithReference(t, raw) })
}

func TestCheckerCompilerRefusesWhatItDoesNotImplement(t *testing.T) {
	schemas := func(envelope string) fstest.MapFS {
		return fstest.MapFS{
			"schemas/envelope.json": {Data: []byte(envelope)},
			"schemas/X.v1.json": {Data: []byte(`{"$id":"https://schemas.reliable-orders.dev/X.v1.json",` +
				`"$ref":"envelope.json"}`)},
		}
	}
	const id = `"$id":"https://schemas.reliable-orders.dev/envelope.json"`
	tests := []struct {
		name     string
		envelope string
		refused  bool
	}{
		{"every implemented keyword", `{` + id + `,"$schema":"s","title":"t","description":"d","type":"object",` +
			`"required":["a"],"properties":{"a":{"type":["string","integer"],"minLength":1,"maxLength":2,` +
			`"pattern":"^a","format":"date-time","minimum":1,"maximum":2,"const":"a"},` +
			`"b":{"type":"array","minItems":0,"maxItems":1,"items":{"$ref":"#/$defs/c"}}},"$defs":{"c":{"const":1}}}`, false},
		{"an unknown keyword", `{` + id + `,"type":"object","minProperties":1}`, true},
		{"an unknown keyword in a definition nobody references", `{` + id + `,"$defs":{"c":{"enum":[1]}}}`, true},
		{"additionalProperties", `{` + id + `,"properties":{"a":{"additionalProperties":false}}}`, true},
		{"another format", `{` + id + `,"format":"email"}`, true},
		{"an object const", `{` + id + `,"const":{"a":1}}`, true},
		{"a boolean schema", `{` + id + `,"items":true}`, true},
		{"a reference to nothing", `{` + id + `,"$ref":"#/$defs/none"}`, true},
		{"an invalid pattern", `{` + id + `,"pattern":"("}`, true},
		{"an unknown type", `{` + id + `,"type":"decimal"}`, true},
		{"a foreign $id", `{"$id":"https://example.com/envelope.json"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := event.CompileCheckers(schemas(tt.envelope))
			if (err != nil) != tt.refused {
				t.Fatalf("CompileCheckers = %v, want refused %v", err, tt.refused)
			}
		})
	}
	if err := event.CompileCheckers(event.Schemas); err != nil {
		t.Fatalf("the embedded schemas: %v", err)
	}
}
