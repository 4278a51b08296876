package rules_test

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/internal/jsoncheck"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/pkg/testkit/rulestest"
)

// sameRuleError reports whether got and want are both nil or both the
// same *rules.RuleError: the field, rule and message a client is answered
// with.
func sameRuleError(got, want error) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	var g, w *rules.RuleError
	return errors.As(got, &g) && errors.As(want, &w) && *g == *w
}

// ruleTexts are the strings the text rules are checked over: every
// string of up to three of the characters the patterns treat differently,
// the patterns' boundaries, and the boundaries of the other rules.
func ruleTexts() []string {
	out := jsoncheck.PatternInputs(3)
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
		{}, rules.MaxAmount(), rules.MaxAmount().Add(decimal.New(1, -2)), rules.MaxAmount().Neg(),
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
		{"ValidateID", rules.RuleID, rules.ValidateID, true},
		{"ValidateCurrency", rules.RuleCurrency, rules.ValidateCurrency, true},
		{"ValidateReason", rules.RuleReason, rules.ValidateReason, false},
		{"ParseAmount", rules.RuleAmount, parsed(rules.ParseAmount), true},
		{"ParsePositiveAmount", rules.RulePositiveAmount, parsed(rules.ParsePositiveAmount), true},
	}
	amounts := []struct {
		name string
		rule string
		fn   func(field string, d decimal.Decimal) error
	}{
		{"ValidateAmount", rules.RuleAmount, rules.ValidateAmount},
		{"ValidatePositiveAmount", rules.RulePositiveAmount, rules.ValidatePositiveAmount},
	}
	inputs := ruleTexts()
	for _, tt := range texts {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range inputs {
				if s == "" && tt.required {
					continue
				}
				got := tt.fn("f", s)
				want := rules.CheckReference("f", tt.rule, s, strconv.Quote(s))
				if !sameRuleError(got, want) {
					t.Errorf("%s(%s) = %v, the reference %v", tt.name, rulestest.Quote(s), got, want)
				}
			}
		})
	}
	decimals := ruleDecimals()
	for _, tt := range amounts {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range decimals {
				got := tt.fn("f", d)
				want := rules.CheckReference("f", tt.rule, d.String(), d.String())
				if !sameRuleError(got, want) {
					t.Errorf("%s(%s) = %v, the reference %v", tt.name, d, got, want)
				}
			}
		})
	}
	t.Run("ValidateQuantity", func(t *testing.T) {
		for _, n := range []int{math.MinInt, -rules.MaxQuantity - 1, -1, 0, 1, 2, rules.MaxQuantity - 1, rules.MaxQuantity,
			rules.MaxQuantity + 1, math.MaxInt32, math.MaxInt32 + 1, 1e18, math.MaxInt} {
			got := rules.ValidateQuantity("f", n)
			want := rules.CheckReference("f", rules.RuleQuantity, json.Number(strconv.Itoa(n)), strconv.Itoa(n))
			if !sameRuleError(got, want) {
				t.Errorf("ValidateQuantity(%d) = %v, the reference %v", n, got, want)
			}
		}
	})
}

// FuzzRulesAgreeWithTheReferenceValidator: each value rule function
// (ValidateID, ParseAmount, ParsePositiveAmount, ValidateAmount,
// ValidatePositiveAmount, ValidateCurrency, ValidateQuantity,
// ValidateReason) answers exactly as the generic validator evaluating its
// definition does, error included. pkg/event's FuzzRulesAgreeWithSchemas
// holds them to the event schemas.
func FuzzRulesAgreeWithTheReferenceValidator(f *testing.F) {
	rulestest.AddSeeds(f)
	f.Fuzz(func(t *testing.T, id, amount, currency string, quantity int, reason string) {
		same := func(name string, got, want error) {
			t.Helper()
			if !sameRuleError(got, want) {
				t.Fatalf("%s: %v, the reference %v", name, got, want)
			}
		}
		reference := func(rule, s string) error { return rules.CheckReference("f", rule, s, strconv.Quote(s)) }
		if id != "" {
			same("ValidateID "+rulestest.Quote(id), rules.ValidateID("f", id), reference(rules.RuleID, id))
		}
		if currency != "" {
			same("ValidateCurrency "+rulestest.Quote(currency), rules.ValidateCurrency("f", currency), reference(rules.RuleCurrency, currency))
		}
		same("ValidateReason "+rulestest.Quote(reason), rules.ValidateReason("f", reason), reference(rules.RuleReason, reason))
		same("ValidateQuantity", rules.ValidateQuantity("f", quantity),
			rules.CheckReference("f", rules.RuleQuantity, json.Number(strconv.Itoa(quantity)), strconv.Itoa(quantity)))
		if amount != "" {
			_, err := rules.ParseAmount("f", amount)
			same("ParseAmount "+rulestest.Quote(amount), err, reference(rules.RuleAmount, amount))
			_, err = rules.ParsePositiveAmount("f", amount)
			same("ParsePositiveAmount "+rulestest.Quote(amount), err, reference(rules.RulePositiveAmount, amount))
		}
		if d, err := decimal.NewFromString(amount); err == nil {
			same("ValidateAmount "+d.String(), rules.ValidateAmount("f", d),
				rules.CheckReference("f", rules.RuleAmount, d.String(), d.String()))
			same("ValidatePositiveAmount "+d.String(), rules.ValidatePositiveAmount("f", d),
				rules.CheckReference("f", rules.RulePositiveAmount, d.String(), d.String()))
		}
	})
}

// BenchmarkValueRules measures one call of a value rule function as the
// points consumer makes it per event (ValidatePositiveAmount) and as the
// order service makes them per request: the generic validator over the
// definition (reference, what the functions ran before) against the
// compiled checker (compiled).
func BenchmarkValueRules(b *testing.B) {
	paid := decimal.RequireFromString("80.00")
	rules := []struct {
		name      string
		compiled  func() error
		reference func() error
	}{
		{
			"ValidatePositiveAmount",
			func() error { return rules.ValidatePositiveAmount("paidAmount", paid) },
			func() error {
				return rules.CheckReference("paidAmount", rules.RulePositiveAmount, paid.String(), paid.String())
			},
		},
		{
			"ValidateID",
			func() error { return rules.ValidateID("orderId", "O-1001") },
			func() error {
				return rules.CheckReference("orderId", rules.RuleID, "O-1001", strconv.Quote("O-1001"))
			},
		},
		{
			"ValidateQuantity",
			func() error { return rules.ValidateQuantity("quantity", 2) },
			func() error { return rules.CheckReference("quantity", rules.RuleQuantity, json.Number("2"), "2") },
		},
	}
	for _, r := range rules {
		for _, impl := range []struct {
			name  string
			check func() error
		}{{"reference", r.reference}, {"compiled", r.compiled}} {
			b.Run(impl.name+"/"+r.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := impl.check(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
