package event_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

func TestValueRules(t *testing.T) {
	dec := decimal.RequireFromString
	tests := []struct {
		name  string
		check func() error
		rule  string // empty: accepted
	}{
		{"id", func() error { return event.ValidateID("f", "O-1001_a.b:c") }, ""},
		{"id of 128", func() error { return event.ValidateID("f", strings.Repeat("a", 128)) }, ""},
		{"id of 129", func() error { return event.ValidateID("f", strings.Repeat("a", 129)) }, event.RuleID},
		{"empty id", func() error { return event.ValidateID("f", "") }, event.RuleID},
		{"id with a space", func() error { return event.ValidateID("f", "SKU 1") }, event.RuleID},
		{"id with a slash", func() error { return event.ValidateID("f", "a/b") }, event.RuleID},
		{"non-ASCII id", func() error { return event.ValidateID("f", "订单1") }, event.RuleID},
		{"quantity 1", func() error { return event.ValidateQuantity("f", 1) }, ""},
		{"quantity max", func() error { return event.ValidateQuantity("f", event.MaxQuantity) }, ""},
		{"quantity 0", func() error { return event.ValidateQuantity("f", 0) }, event.RuleQuantity},
		{"quantity above max", func() error { return event.ValidateQuantity("f", event.MaxQuantity+1) }, event.RuleQuantity},
		{"currency", func() error { return event.ValidateCurrency("f", "CNY") }, ""},
		{"lower-case currency", func() error { return event.ValidateCurrency("f", "cny") }, event.RuleCurrency},
		{"empty currency", func() error { return event.ValidateCurrency("f", "") }, event.RuleCurrency},
		{"reason of 500 runes", func() error { return event.ValidateReason("f", strings.Repeat("退", 500)) }, ""},
		{"reason of 501 runes", func() error { return event.ValidateReason("f", strings.Repeat("a", 501)) }, event.RuleReason},
		{"reason with NUL", func() error { return event.ValidateReason("f", "a\x00b") }, event.RuleReason},
		{"reason with a tab", func() error { return event.ValidateReason("f", "a\tb") }, event.RuleReason},
		{"reason of two lines", func() error { return event.ValidateReason("f", "a\nb") }, event.RuleReason},
		{"reason with a carriage return", func() error { return event.ValidateReason("f", "a\rb") }, event.RuleReason},
		{"reason with DEL", func() error { return event.ValidateReason("f", "a\x7fb") }, event.RuleReason},
		{"reason with a C1 control", func() error { return event.ValidateReason("f", "a\u0085b") }, event.RuleReason},
		{"reason with the last C1 control", func() error { return event.ValidateReason("f", "\u009f") }, event.RuleReason},
		{"reason with a no-break space", func() error { return event.ValidateReason("f", "a\u00a0b ~") }, ""},
		{"empty reason", func() error { return event.ValidateReason("f", "") }, ""},
		{"zero amount", func() error { return event.ValidateAmount("f", dec("0")) }, ""},
		{"max amount", func() error { return event.ValidateAmount("f", event.MaxAmount()) }, ""},
		{"above max amount", func() error { return event.ValidateAmount("f", event.MaxAmount().Add(dec("0.01"))) }, event.RuleAmount},
		{"negative amount", func() error { return event.ValidateAmount("f", dec("-1")) }, event.RuleAmount},
		{"three places", func() error { return event.ValidateAmount("f", dec("1.005")) }, event.RuleAmount},
		{"positive 0.01", func() error { return event.ValidatePositiveAmount("f", dec("0.01")) }, ""},
		{"positive 0.1", func() error { return event.ValidatePositiveAmount("f", dec("0.1")) }, ""},
		{"positive 80", func() error { return event.ValidatePositiveAmount("f", dec("80")) }, ""},
		{"positive max", func() error { return event.ValidatePositiveAmount("f", event.MaxAmount()) }, ""},
		{"positive zero", func() error { return event.ValidatePositiveAmount("f", dec("0.00")) }, event.RulePositiveAmount},
		{"positive negative", func() error { return event.ValidatePositiveAmount("f", dec("-0.01")) }, event.RulePositiveAmount},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check()
			if tt.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var rerr *event.RuleError
			if !errors.As(err, &rerr) {
				t.Fatalf("got %v, want a *RuleError", err)
			}
			if rerr.Field != "f" || rerr.Rule != tt.rule || !strings.HasPrefix(err.Error(), "f ") {
				t.Fatalf("got %+v (%v), want field f and rule %s", rerr, err, tt.rule)
			}
		})
	}
}

func TestParseAmountText(t *testing.T) {
	tests := []struct {
		text     string
		positive bool
		want     string // empty: refused
	}{
		{"80", true, "80"},
		{"80.5", true, "80.5"},
		{"80.00", true, "80"},
		{"0.01", true, "0.01"},
		{"9999999999999999.99", true, "9999999999999999.99"},
		{"0", false, "0"},
		{"0", true, ""},
		{"0.00", true, ""},
		{"", false, ""},
		{"080", false, ""},
		{"1e3", false, ""},
		{"+1", false, ""},
		{"-1", false, ""},
		{"1.", false, ""},
		{".5", false, ""},
		{"1.005", false, ""},
		{"10000000000000000", false, ""},
		{" 1", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			parse := event.ParseAmount
			if tt.positive {
				parse = event.ParsePositiveAmount
			}
			d, err := parse("amount", tt.text)
			if tt.want == "" {
				var rerr *event.RuleError
				if !errors.As(err, &rerr) || rerr.Field != "amount" {
					t.Fatalf("got %s, %v; want a RuleError on amount", d, err)
				}
				return
			}
			if err != nil || !d.Equal(decimal.RequireFromString(tt.want)) {
				t.Fatalf("got %s, %v; want %s", d, err, tt.want)
			}
		})
	}
}

func TestRuleErrorQuotesAtMostAShortValue(t *testing.T) {
	err := event.ValidateID("orderId", strings.Repeat("x", 1<<20))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("message of %d bytes: %.200v", len(err.Error()), err)
	}
}

// TestLimitsMatchTheRules keeps the Go constants, which callers use before
// they can build a value, equal to the definitions they summarise.
func TestLimitsMatchTheRules(t *testing.T) {
	raw, err := event.Schemas.ReadFile("schemas/rules.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"quantity maximum", float64(event.MaxQuantity), doc.Defs[event.RuleQuantity]["maximum"]},
		{"items maxItems", float64(event.MaxItems), doc.Defs[event.RuleItems]["maxItems"]},
		{"priced items maxItems", float64(event.MaxItems), doc.Defs[event.RulePricedItems]["maxItems"]},
		{"reason maxLength", float64(event.MaxReasonRune), doc.Defs[event.RuleReason]["maxLength"]},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go says %v, rules.json %v", c.name, c.got, c.want)
		}
	}
	if p, _ := doc.Defs[event.RuleID]["pattern"].(string); !strings.Contains(p, "{1,128}") || event.MaxIDLength != 128 {
		t.Errorf("id pattern %q and MaxIDLength %d disagree", p, event.MaxIDLength)
	}
}

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
			return event.RuleID
		case field == "currency":
			return event.RuleCurrency
		case field == "reason":
			return event.RuleReason
		case field == "quantity":
			return event.RuleQuantity
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

func TestPointsFor(t *testing.T) {
	dec := decimal.RequireFromString
	tests := []struct {
		paid, refunded string
		want           int64
	}{
		{"80.00", "0", 80},
		{"80.99", "0", 80},
		{"0.99", "0", 0},
		{"20.00", "0.01", 19},
		{"20.00", "20.00", 0},
		{"20.00", "25.00", 0},
		{"9999999999999999.99", "0", 9999999999999999},
	}
	for _, tt := range tests {
		if got := event.PointsFor(dec(tt.paid), dec(tt.refunded)); got != tt.want {
			t.Errorf("PointsFor(%s, %s) = %d, want %d", tt.paid, tt.refunded, got, tt.want)
		}
	}
}

func TestReturnRefundIDIsAFunctionOfThePayment(t *testing.T) {
	a, b := event.ReturnRefundID("P-1"), event.ReturnRefundID("P-2")
	if a != event.ReturnRefundID("P-1") || a == b {
		t.Fatalf("ids %s and %s: want the same id for the same payment only", a, b)
	}
	if err := event.ValidateID("refundId", event.ReturnRefundID(strings.Repeat("P", event.MaxIDLength))); err != nil {
		t.Fatalf("the refund id of the longest payment id breaks the id rule: %v", err)
	}
}
