package event_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/internal/jsoncheck"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

func TestPatternMatchersAgreeWithRegexp(t *testing.T) {
	inputs := jsoncheck.PatternInputs(4)
	for _, pattern := range jsoncheck.MatchedPatterns() {
		t.Run(pattern, func(t *testing.T) {
			re := regexp.MustCompile(pattern)
			match := jsoncheck.Matcher(pattern)
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
	raw, err := event.Schemas.ReadFile("schemas/envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	all.Write(raw)
	all.Write(rules.Schema())
	for _, pattern := range jsoncheck.MatchedPatterns() {
		quoted := strings.ReplaceAll(pattern, `\`, `\\`)
		if !strings.Contains(all.String(), `"pattern": "`+quoted+`"`) {
			t.Errorf("pattern %s is in no schema", pattern)
		}
	}
}
