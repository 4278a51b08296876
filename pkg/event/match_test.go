package event_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// patternInputs is every string of up to combos characters over the
// characters the patterns treat differently, and strings at each
// pattern's length limits: the inputs a hand-written matcher must answer
// as the regexp does.
func patternInputs(combos int) []string {
	alphabet := []string{"0", "1", "9", "a", "f", "g", "z", "A", "F", "Z", ".", "-", "_", ":", "/", " ", "\n", "é", "\xff", "\x00", "\t", "\x7f", "\u0085", "\u00a0", "\xc2"}
	out := []string{""}
	level := []string{""}
	for range combos {
		var next []string
		for _, prefix := range level {
			for _, c := range alphabet {
				next = append(next, prefix+c)
			}
		}
		out = append(out, next...)
		level = next
	}
	// The edges of the control characters, alone and inside text, and the
	// byte sequences around C1's two-byte encoding.
	for _, c := range []string{"\x01", "\x1f", "\x20", "\x7e", "\u0080", "\u009f", "\u00a0", "\u2028", "\xc2\x7f", "\xc2\xc0", "\xc0\x80", "\xc2"} {
		out = append(out, c, "a"+c+"b", c+c)
	}
	for n := 14; n <= 34; n++ {
		for _, c := range []string{"a", "0", "f", "g", "A"} {
			out = append(out, strings.Repeat(c, n), strings.Repeat("a", n-1)+c, c+strings.Repeat("0", n-1))
		}
	}
	for _, n := range []int{126, 127, 128, 129, 130} {
		out = append(out, strings.Repeat("i", n), strings.Repeat("i", n-1)+"/", strings.Repeat("é", n))
	}
	for n := range 19 {
		for _, lead := range []string{"", "0", "1", "9"} {
			whole := lead + strings.Repeat("0", n)
			for _, frac := range []string{"", ".", ".0", ".00", ".01", ".10", ".1", ".9", ".99", ".000", ".5x", "..1", ".1.1"} {
				out = append(out, whole+frac, "-"+whole+frac, whole+frac+"\n")
			}
		}
	}
	return out
}

func TestPatternMatchersAgreeWithRegexp(t *testing.T) {
	inputs := patternInputs(4)
	for _, pattern := range event.MatchedPatterns() {
		t.Run(pattern, func(t *testing.T) {
			re := regexp.MustCompile(pattern)
			match := event.PatternMatcher(pattern)
			if match == nil {
				t.Fatal("no matcher")
			}
			matched := 0
			for _, s := range inputs {
				want := re.MatchString(s)
				if got := match([]byte(s)); got != want {
					t.Fatalf("%q: matcher %v, regexp %v", s, got, want)
				}
				if want {
					matched++
				}
			}
			if matched == 0 || matched == len(inputs) {
				t.Fatalf("%d of %d inputs match: the inputs do not tell matchers apart", matched, len(inputs))
			}
		})
	}
}

// The schemas' patterns, every one with a matcher or none, are what the
// differential tests cover; this keeps the list of matched patterns from
// naming a pattern no schema uses.
func TestEveryMatchedPatternIsInTheSchemas(t *testing.T) {
	var all strings.Builder
	for _, name := range []string{"envelope.json", "rules.json"} {
		raw, err := event.Schemas.ReadFile("schemas/" + name)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(raw)
	}
	for _, pattern := range event.MatchedPatterns() {
		quoted := strings.ReplaceAll(pattern, `\`, `\\`)
		if !strings.Contains(all.String(), `"pattern": "`+quoted+`"`) {
			t.Errorf("pattern %s is in no schema", pattern)
		}
	}
}
