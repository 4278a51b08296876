package event

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
	"github.com/shopspring/decimal"
)

// The value rules. Each is a definition in schemas/rules.json: the event
// schemas reference it, so a consumer's Parse enforces it, and the functions
// below evaluate the same definition, compiled once into the checker Parse
// runs where the schemas reference it (ruleChecker), so the service that
// accepts a value from a client enforces it too, at the cost of a few
// comparisons per call. A value the order service accepts can therefore
// never be dead-lettered downstream for breaking a rule.
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

// rulesFile holds the definitions.
const rulesFile = "rules.json"

func ruleNames() []string {
	return []string{RuleID, RuleAmount, RulePositiveAmount, RuleQuantity, RuleCurrency, RuleReason,
		RuleItems, RuleReturnedItems, RulePricedItems}
}

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

// ruleChecker returns the compiled checker of definition rule: the one
// the event schemas' checkers run where they reference it, so a service
// checking a client's value and a consumer parsing an event evaluate the
// same compiled rule, without the generic validator's cost per call.
func ruleChecker(rule string) (*checker, error) {
	set, err := checkers()
	if err != nil {
		return nil, fmt.Errorf("load value rules: %w", err)
	}
	ch, ok := set.rules[rule]
	if !ok {
		return nil, fmt.Errorf("load value rules: no definition %q in %s", rule, rulesFile)
	}
	return ch, nil
}

// checkText evaluates definition rule against the string s. A refused
// value is quoted back in Go syntax when quote is set, as is otherwise;
// only a refusal pays for the quoting.
func checkText(field, rule, s string, quote bool) error {
	ch, err := ruleChecker(rule)
	if err != nil {
		return err
	}
	if ch.checkString([]byte(s)) == nil {
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
	ch, err := ruleChecker(RuleQuantity)
	if err != nil {
		return err
	}
	if ch.checkNumber(number{small: int64(n), isSmall: true}) == nil {
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

// PointsFor is the loyalty rule the points service applies and
// reconciliation checks: an order is worth one point per whole currency
// unit the customer paid and has not had back, rounded down, never below
// zero. An order of 80.00 earns 80 points; after a refund of 0.01 it is
// worth 79.
func PointsFor(paid, refunded decimal.Decimal) int64 {
	net := paid.Sub(refunded)
	if !net.IsPositive() {
		return 0
	}
	return net.Floor().IntPart()
}

// ReturnRefundID is the refund id under which a payment the order could
// not take is returned: a function of the payment, so the order service
// (OrderPaymentRejected) and reconciliation (a compensation) name the same
// refund, and the payment service, which makes a refund once per id, gives
// the money back once whoever asks first.
func ReturnRefundID(paymentID string) string {
	namespace := uuid.MustParse("8d1f6f64-6a0e-4f0e-9c53-4d6f1b2e7a10")
	return "R-" + uuid.NewSHA1(namespace, []byte(paymentID)).String()
}

// ReasonOutOfStock is why an order whose goods the stock could not cover
// was refunded in full and cancelled: the reason of its last
// OrderRefundRequested and OrderRefunded, and of the order itself.
const ReasonOutOfStock = "OUT_OF_STOCK"

// ShortageRefundID is the refund id under which a paid order the stock
// could not cover gets its money back: a function of the order, so however
// often the shortage is reported the order asks for one refund, and the
// payment service, which makes a refund once per id, makes it once.
func ShortageRefundID(orderID string) string {
	namespace := uuid.MustParse("3b0c2a57-9f4e-4c1d-8e7a-5a2f6d9b1c34")
	return "R-" + uuid.NewSHA1(namespace, []byte(orderID)).String()
}
