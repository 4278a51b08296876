package rules_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
)

func TestValueRules(t *testing.T) {
	dec := decimal.RequireFromString
	tests := []struct {
		name  string
		check func() error
		rule  string // empty: accepted
	}{
		{"id", func() error { return rules.ValidateID("f", "O-1001_a.b:c") }, ""},
		{"id of 128", func() error { return rules.ValidateID("f", strings.Repeat("a", 128)) }, ""},
		{"id of 129", func() error { return rules.ValidateID("f", strings.Repeat("a", 129)) }, rules.RuleID},
		{"empty id", func() error { return rules.ValidateID("f", "") }, rules.RuleID},
		{"id with a space", func() error { return rules.ValidateID("f", "SKU 1") }, rules.RuleID},
		{"id with a slash", func() error { return rules.ValidateID("f", "a/b") }, rules.RuleID},
		{"non-ASCII id", func() error { return rules.ValidateID("f", "订单1") }, rules.RuleID},
		{"quantity 1", func() error { return rules.ValidateQuantity("f", 1) }, ""},
		{"quantity max", func() error { return rules.ValidateQuantity("f", rules.MaxQuantity) }, ""},
		{"quantity 0", func() error { return rules.ValidateQuantity("f", 0) }, rules.RuleQuantity},
		{"quantity above max", func() error { return rules.ValidateQuantity("f", rules.MaxQuantity+1) }, rules.RuleQuantity},
		{"currency", func() error { return rules.ValidateCurrency("f", "CNY") }, ""},
		{"lower-case currency", func() error { return rules.ValidateCurrency("f", "cny") }, rules.RuleCurrency},
		{"empty currency", func() error { return rules.ValidateCurrency("f", "") }, rules.RuleCurrency},
		{"reason of 500 runes", func() error { return rules.ValidateReason("f", strings.Repeat("退", 500)) }, ""},
		{"reason of 501 runes", func() error { return rules.ValidateReason("f", strings.Repeat("a", 501)) }, rules.RuleReason},
		{"reason with NUL", func() error { return rules.ValidateReason("f", "a\x00b") }, rules.RuleReason},
		{"reason with a tab", func() error { return rules.ValidateReason("f", "a\tb") }, rules.RuleReason},
		{"reason of two lines", func() error { return rules.ValidateReason("f", "a\nb") }, rules.RuleReason},
		{"reason with a carriage return", func() error { return rules.ValidateReason("f", "a\rb") }, rules.RuleReason},
		{"reason with DEL", func() error { return rules.ValidateReason("f", "a\x7fb") }, rules.RuleReason},
		{"reason with a C1 control", func() error { return rules.ValidateReason("f", "a\u0085b") }, rules.RuleReason},
		{"reason with the last C1 control", func() error { return rules.ValidateReason("f", "\u009f") }, rules.RuleReason},
		{"reason with a no-break space", func() error { return rules.ValidateReason("f", "a\u00a0b ~") }, ""},
		{"empty reason", func() error { return rules.ValidateReason("f", "") }, ""},
		{"zero amount", func() error { return rules.ValidateAmount("f", dec("0")) }, ""},
		{"max amount", func() error { return rules.ValidateAmount("f", rules.MaxAmount()) }, ""},
		{"above max amount", func() error { return rules.ValidateAmount("f", rules.MaxAmount().Add(dec("0.01"))) }, rules.RuleAmount},
		{"negative amount", func() error { return rules.ValidateAmount("f", dec("-1")) }, rules.RuleAmount},
		{"three places", func() error { return rules.ValidateAmount("f", dec("1.005")) }, rules.RuleAmount},
		{"positive 0.01", func() error { return rules.ValidatePositiveAmount("f", dec("0.01")) }, ""},
		{"positive 0.1", func() error { return rules.ValidatePositiveAmount("f", dec("0.1")) }, ""},
		{"positive 80", func() error { return rules.ValidatePositiveAmount("f", dec("80")) }, ""},
		{"positive max", func() error { return rules.ValidatePositiveAmount("f", rules.MaxAmount()) }, ""},
		{"positive zero", func() error { return rules.ValidatePositiveAmount("f", dec("0.00")) }, rules.RulePositiveAmount},
		{"positive negative", func() error { return rules.ValidatePositiveAmount("f", dec("-0.01")) }, rules.RulePositiveAmount},
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
			var rerr *rules.RuleError
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
			parse := rules.ParseAmount
			if tt.positive {
				parse = rules.ParsePositiveAmount
			}
			d, err := parse("amount", tt.text)
			if tt.want == "" {
				var rerr *rules.RuleError
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
	err := rules.ValidateID("orderId", strings.Repeat("x", 1<<20))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("message of %d bytes: %.200v", len(err.Error()), err)
	}
}

// TestLimitsMatchTheRules keeps the Go constants, which callers use before
// they can build a value, equal to the definitions they summarise.
func TestLimitsMatchTheRules(t *testing.T) {
	raw := rules.Schema()
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
		{"quantity maximum", float64(rules.MaxQuantity), doc.Defs[rules.RuleQuantity]["maximum"]},
		{"items maxItems", float64(rules.MaxItems), doc.Defs[rules.RuleItems]["maxItems"]},
		{"priced items maxItems", float64(rules.MaxItems), doc.Defs[rules.RulePricedItems]["maxItems"]},
		{"reason maxLength", float64(rules.MaxReasonRune), doc.Defs[rules.RuleReason]["maxLength"]},
	} {
		if c.got != c.want {
			t.Errorf("%s: Go says %v, rules.json %v", c.name, c.got, c.want)
		}
	}
	if p, _ := doc.Defs[rules.RuleID]["pattern"].(string); !strings.Contains(p, "{1,128}") || rules.MaxIDLength != 128 {
		t.Errorf("id pattern %q and MaxIDLength %d disagree", p, rules.MaxIDLength)
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
		if got := rules.PointsFor(dec(tt.paid), dec(tt.refunded)); got != tt.want {
			t.Errorf("PointsFor(%s, %s) = %d, want %d", tt.paid, tt.refunded, got, tt.want)
		}
	}
}

func TestReturnRefundIDIsAFunctionOfThePayment(t *testing.T) {
	a, b := rules.ReturnRefundID("P-1"), rules.ReturnRefundID("P-2")
	if a != rules.ReturnRefundID("P-1") || a == b {
		t.Fatalf("ids %s and %s: want the same id for the same payment only", a, b)
	}
	if err := rules.ValidateID("refundId", rules.ReturnRefundID(strings.Repeat("P", rules.MaxIDLength))); err != nil {
		t.Fatalf("the refund id of the longest payment id breaks the id rule: %v", err)
	}
}
