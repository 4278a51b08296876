package event

import (
	"encoding/json"
	"fmt"

	"github.com/shopspring/decimal"
)

// Money is an exact amount that travels as a decimal string with two
// places ("80.00"), never as a float.
type Money struct {
	decimal.Decimal
}

// NewMoney wraps d.
func NewMoney(d decimal.Decimal) Money { return Money{d} }

// ParseMoney parses a decimal string such as "80.00".
func ParseMoney(s string) (Money, error) {
	d, err := decimal.NewFromString(s)
	if err != nil {
		return Money{}, fmt.Errorf("amount %q is not a decimal: %w", s, err)
	}
	return Money{d}, nil
}

// String formats the amount with two decimal places.
func (m Money) String() string { return m.StringFixed(2) }

// MarshalJSON encodes the amount as a JSON string with two places.
func (m Money) MarshalJSON() ([]byte, error) { return json.Marshal(m.String()) }

// UnmarshalJSON accepts only a JSON string, so a float never becomes money.
func (m *Money) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("amount must be a decimal string: %w", err)
	}
	v, err := ParseMoney(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}
