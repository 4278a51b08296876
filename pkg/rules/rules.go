// Package rules is the suite's business rules, defined once: the value
// rules every service checks what it accepts with (ids, amounts,
// quantities, currencies, free texts, how many lines an order has), and
// the rules more than one service must apply alike (the points an order is
// worth, the refund ids a return and a shortage are made under, what a
// callback reports). The value rules are the definitions of rules.json:
// the event schemas of pkg/event reference them, so a consumer parsing an
// event and a service checking a client's value evaluate the same
// definitions. The domains import this package, never the wire (pkg/event).
package rules

import (
	_ "embed" // rules.json
	"fmt"
	"strconv"
	"sync"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/internal/jsoncheck"
)

// The value rules. Each is a definition in rules.json: the event schemas
// reference it, so a consumer's event.Parse enforces it, and the functions
// below evaluate the same definition, compiled once by the checker
// event.Parse runs, so the service that accepts a value from a client
// enforces it too, at the cost of a few comparisons per call. A value the
// order service accepts can therefore never be dead-lettered downstream
// for breaking a rule.
const (
	RuleID             = "id"
	RuleAmount         = "amount"
	RulePositiveAmount = "positiveAmount"
	RuleQuantity       = "quantity"
	RuleCurrency       = "currency"
	RuleReason         = "reason"
	RuleItems          = "items"
	RuleReturnedItems  = "returnedItems"
	RulePricedItems    = "pricedItems"
)

// File is the name the event schemas reference the definitions by
// ("rules.json#/$defs/id").
const File = "rules.json"

// schemaText is rules.json; a string, so nothing can change it.
//
//go:embed rules.json
var schemaText string

// Schema returns rules.json, for the event schemas that reference its
// definitions to be compiled with it.
func Schema() []byte { return []byte(schemaText) }

// Limits the rules set, for callers that must check a size before they can
// build the value (a request's item count) and for documentation. A test
// keeps them equal to rules.json.
const (
	MaxIDLength   = 128
	MaxQuantity   = 1_000_000
	MaxItems      = 100
	MaxReasonRune = 500
	MoneyPlaces   = 2
)

// MaxAmount returns the largest amount the amount rules allow,
// 9999999999999999.99: what a NUMERIC(18,2) column holds.
func MaxAmount() decimal.Decimal { return decimal.New(999_999_999_999_999_999, -MoneyPlaces) }

// RuleError says which field breaks which rule, in words a client can act
// on. Every service answers it with 400 and businessCode INVALID_REQUEST.
type RuleError struct {
	Field string
	// Rule names the definition of rules.json; empty for an invariant of
	// a whole request (duplicate SKUs, say) rather than of one value.
	Rule    string
	Message string
}

// Error names the field first, so the message says what to fix.
func (e *RuleError) Error() string { return e.Field + " " + e.Message }

// Invalid returns a RuleError for an invariant that no single value rule
// covers.
func Invalid(field, format string, args ...any) *RuleError {
	return &RuleError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// message says rule in words.
func message(rule string) string {
	switch rule {
	case RuleID:
		return "must be 1 to 128 letters, digits or - _ . :"
	case RuleAmount:
		return `must be a decimal string of at most 16 integer digits and 2 decimal places, like "80.00"`
	case RulePositiveAmount:
		return `must be greater than zero: a decimal string of at most 16 integer digits and 2 decimal places, like "80.00"`
	case RuleQuantity:
		return fmt.Sprintf("must be a whole number from 1 to %d", MaxQuantity)
	case RuleCurrency:
		return "must be 3 upper-case letters (ISO 4217)"
	case RuleReason:
		return fmt.Sprintf("must be one line of at most %d characters without control characters (U+0000–U+001F, U+007F–U+009F)", MaxReasonRune)
	}
	return "breaks rule " + rule
}

// checkers is rules.json's definitions compiled once, by name: the file is
// embedded, so the table is read-only after its first use.
var checkers = sync.OnceValues(func() (map[string]*jsoncheck.Checker, error) {
	set, err := jsoncheck.Compile(map[string][]byte{File: Schema()})
	if err != nil {
		return nil, err
	}
	return set.Defs[File], nil
})

// checker returns the compiled checker of definition rule.
func checker(rule string) (*jsoncheck.Checker, error) {
	defs, err := checkers()
	if err != nil {
		return nil, fmt.Errorf("load value rules: %w", err)
	}
	ch, ok := defs[rule]
	if !ok {
		return nil, fmt.Errorf("load value rules: no definition %q in %s", rule, File)
	}
	return ch, nil
}

// checkText evaluates definition rule against the string s. A refused
// value is quoted back in Go syntax when quote is set, as is otherwise;
// only a refusal pays for the quoting.
func checkText(field, rule, s string, quote bool) error {
	ch, err := checker(rule)
	if err != nil {
		return err
	}
	if ch.CheckString([]byte(s)) == nil {
		return nil
	}
	if quote {
		s = strconv.Quote(s)
	}
	return refuse(field, rule, s)
}

// refuse returns the RuleError of a value that breaks rule. got is cut
// short so a huge value is not echoed.
func refuse(field, rule, got string) error {
	const show = 64
	if len(got) > show {
		got = got[:show] + "…"
	}
	return &RuleError{Field: field, Rule: rule, Message: fmt.Sprintf("%s (got %s)", message(rule), got)}
}

// ValidateID checks an opaque id: an order, customer, SKU, payment, refund
// or event id.
func ValidateID(field, id string) error {
	if id == "" {
		return &RuleError{Field: field, Rule: RuleID, Message: "is required"}
	}
	return checkText(field, RuleID, id, true)
}

// ValidateQuantity checks the units of one order line.
func ValidateQuantity(field string, n int) error {
	ch, err := checker(RuleQuantity)
	if err != nil {
		return err
	}
	if ch.CheckInt(int64(n)) == nil {
		return nil
	}
	return refuse(field, RuleQuantity, strconv.Itoa(n))
}

// ValidateCurrency checks a currency code.
func ValidateCurrency(field, currency string) error {
	if currency == "" {
		return &RuleError{Field: field, Rule: RuleCurrency, Message: "is required"}
	}
	return checkText(field, RuleCurrency, currency, true)
}

// ValidateReason checks a free text a client sends: a cancel or refund
// reason, who started an operation. It is one line without control
// characters, so it can travel in a JSONB event (which cannot hold NUL),
// a TEXT column and a log line unchanged.
func ValidateReason(field, reason string) error {
	return checkText(field, RuleReason, reason, true)
}

// ValidateAmount checks an amount that may be zero (what has been refunded,
// say).
func ValidateAmount(field string, d decimal.Decimal) error {
	return checkText(field, RuleAmount, d.String(), false)
}

// ValidatePositiveAmount checks an amount that must be more than zero: a
// price, an order's total, a payment, a refund.
func ValidatePositiveAmount(field string, d decimal.Decimal) error {
	return checkText(field, RulePositiveAmount, d.String(), false)
}

// ParseAmount reads an amount a client sent as text ("80", "80.5",
// "80.00"); zero is allowed.
func ParseAmount(field, s string) (decimal.Decimal, error) {
	return parseAmount(field, RuleAmount, s)
}

// ParsePositiveAmount reads an amount a client sent as text that must be
// more than zero.
func ParsePositiveAmount(field, s string) (decimal.Decimal, error) {
	return parseAmount(field, RulePositiveAmount, s)
}

func parseAmount(field, rule, s string) (decimal.Decimal, error) {
	if s == "" {
		return decimal.Decimal{}, &RuleError{Field: field, Rule: rule, Message: "is required"}
	}
	if err := checkText(field, rule, s, true); err != nil {
		return decimal.Decimal{}, err
	}
	d, err := decimal.NewFromString(s)
	if err != nil { // the rule admits only what NewFromString reads
		return decimal.Decimal{}, fmt.Errorf("%s: %w", field, err)
	}
	return d, nil
}
