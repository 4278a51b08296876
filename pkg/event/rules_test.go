package event_test

import (
	"encoding/json"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// TestEveryFieldUsesItsRule walks every event schema and fails on a field
// that carries an id, an amount, a quantity, a currency, a reason or order
// lines without referencing its rule, or that sets a constraint of its own:
// a rule is defined once, in rules.json.
func TestEveryFieldUsesItsRule(t *testing.T) {
	names, err := fs.Glob(event.Schemas, "schemas/*.json")
	if err != nil {
		t.Fatal(err)
	}
	want := func(field string) string {
		switch {
		case field == "traceId": // the W3C trace id, a format of its own
			return ""
		case field == "sku" || strings.HasSuffix(field, "Id"):
			return rules.RuleID
		case field == "currency":
			return rules.RuleCurrency
		case field == "reason":
			return rules.RuleReason
		case field == "quantity":
			return rules.RuleQuantity
		case strings.Contains(strings.ToLower(field), "amount") || field == "unitPrice":
			return "amount"
		case strings.HasSuffix(strings.ToLower(field), "items"):
			return "items"
		}
		return ""
	}
	checked := 0
	for _, name := range names {
		base := path.Base(name)
		if base == "rules.json" {
			continue
		}
		raw, err := event.Schemas.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		props := doc.Properties
		if data, ok := props["data"]["properties"].(map[string]any); ok {
			props = map[string]map[string]any{}
			for k, v := range data {
				props[k] = v.(map[string]any)
			}
		}
		for field, def := range props {
			rule := want(field)
			if rule == "" {
				continue
			}
			checked++
			ref, _ := def["$ref"].(string)
			if !strings.HasPrefix(ref, "rules.json#/$defs/") || !strings.Contains(strings.ToLower(ref), strings.ToLower(rule)) {
				t.Errorf("%s: %s references %q, want the %s rule of rules.json", base, field, ref, rule)
			}
			for _, own := range []string{"pattern", "minLength", "maxLength", "minimum", "maximum", "items", "minItems", "maxItems"} {
				if _, set := def[own]; set {
					t.Errorf("%s: %s sets %s itself; put it in rules.json", base, field, own)
				}
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d fields checked: the walk missed the schemas", checked)
	}
}
