package event_test

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// sameRuleError reports whether got and want are both nil or both the
// same *event.RuleError: the field, rule and message a client is answered
// with.
func sameRuleError(got, want error) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	var g, w *event.RuleError
	return errors.As(got, &g) && errors.As(want, &w) && *g == *w
}

// ruleTexts are the strings the text rules are checked over: every
// string of up to three of the characters the patterns treat differently,
// the patterns' boundaries, and the boundaries of the other rules.
func ruleTexts() []string {
	out := patternInputs(3)
	for _, n := range []int{0, 1, 2, 3, 4, 127, 128, 129, 499, 500, 501} {
		for _, c := range []string{"a", "A", "0", "é", "退", "\xff", " "} {
			out = append(out, strings.Repeat(c, n), strings.Repeat("a", max(n-1, 0))+c)
		}
	}
	out = append(out,
		"O-1001_a.b:c", "SKU 1", "a/b", "订单1", "CNY", "cny", "CN", "CNYY", "ÄBC", "AB1", " USD", "USD\n",
		"0", "0.0", "0.00", "0.000", "00", "01", "-0", "-1", "+1", "1e3", "1E3", ".5", "5.", "0.01", "0.1", "0.10",
		"0.001", "1.005", "80", "80.5", "80.00", "9999999999999999.99", "9999999999999999.999", "10000000000000000",
		"10000000000000000.00", "1,00", " 1", "1 ", "1\n", "١", "NaN", "Inf", "0x10", "1_000",
		"\u2028", "line\nbreak", "\x00", strings.Repeat("退", 500)+"a", strings.Repeat("a", 10_000))
	return out
}

// ruleDecimals are the amounts the amount rules are checked over: every
// text of ruleTexts that is a decimal, and the limits of NUMERIC(18,2).
func ruleDecimals() []decimal.Decimal {
	out := []decimal.Decimal{
		{}, event.MaxAmount(), event.MaxAmount().Add(decimal.New(1, -2)), event.MaxAmount().Neg(),
		decimal.New(1, -30), decimal.New(1, 30), decimal.New(-5, -1), decimal.New(100, -2), decimal.New(1, 16),
		decimal.New(1, 16).Sub(decimal.New(1, -2)), decimal.New(1005, -3), decimal.New(math.MaxInt64, 0),
	}
	for _, s := range ruleTexts() {
		if d, err := decimal.NewFromString(s); err == nil {
			out = append(out, d)
		}
	}
	return out
}

// TestValueRulesAgreeWithTheReferenceValidator: ValidateID and the other
// value rule functions, which run the compiled checkers, answer every
// boundary input exactly as the generic JSON Schema validator evaluating
// the same definition of rules.json does, error message included.
func TestValueRulesAgreeWithTheReferenceValidator(t *testing.T) {
	parsed := func(parse func(field, s string) (decimal.Decimal, error)) func(field, s string) error {
		return func(field, s string) error {
			_, err := parse(field, s)
			return err
		}
	}
	texts := []struct {
		name string
		rule string
		fn   func(field, s string) error
		// required: the function refuses "" as "is required" before the
		// rule is evaluated.
		required bool
	}{
		{"ValidateID", event.RuleID, event.ValidateID, true},
		{"ValidateCurrency", event.RuleCurrency, event.ValidateCurrency, true},
		{"ValidateReason", event.RuleReason, event.ValidateReason, false},
		{"ParseAmount", event.RuleAmount, parsed(event.ParseAmount), true},
		{"ParsePositiveAmount", event.RulePositiveAmount, parsed(event.ParsePositiveAmount), true},
	}
	amounts := []struct {
		name string
		rule string
		fn   func(field string, d decimal.Decimal) error
	}{
		{"ValidateAmount", event.RuleAmount, event.ValidateAmount},
		{"ValidatePositiveAmount", event.RulePositiveAmount, event.ValidatePositiveAmount},
	}
	inputs := ruleTexts()
	for _, tt := range texts {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range inputs {
				if s == "" && tt.required {
					continue
				}
				got := tt.fn("f", s)
				want := event.CheckRuleReference("f", tt.rule, s, strconv.Quote(s))
				if !sameRuleError(got, want) {
					t.Errorf("%s(%s) = %v, the reference %v", tt.name, quoteShort(s), got, want)
				}
			}
		})
	}
	decimals := ruleDecimals()
	for _, tt := range amounts {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range decimals {
				got := tt.fn("f", d)
				want := event.CheckRuleReference("f", tt.rule, d.String(), d.String())
				if !sameRuleError(got, want) {
					t.Errorf("%s(%s) = %v, the reference %v", tt.name, d, got, want)
				}
			}
		})
	}
	t.Run("ValidateQuantity", func(t *testing.T) {
		for _, n := range []int{math.MinInt, -event.MaxQuantity - 1, -1, 0, 1, 2, event.MaxQuantity - 1, event.MaxQuantity,
			event.MaxQuantity + 1, math.MaxInt32, math.MaxInt32 + 1, 1e18, math.MaxInt} {
			got := event.ValidateQuantity("f", n)
			want := event.CheckRuleReference("f", event.RuleQuantity, json.Number(strconv.Itoa(n)), strconv.Itoa(n))
			if !sameRuleError(got, want) {
				t.Errorf("ValidateQuantity(%d) = %v, the reference %v", n, got, want)
			}
		}
	})
}
