// Package rulestest holds what the tests that hold the value rules to
// another definition of them share: the fuzz seeds of FuzzRulesAgree* in
// pkg/rules (against the reference validator) and pkg/event (against the
// event schemas), so both start from the same edges.
package rulestest

import (
	"encoding/json"
	"strings"
	"testing"
)

// Values are one input of each value rule: an id, an amount, a currency, a
// quantity and a reason, in the order the fuzz targets take them.
type Values struct {
	ID       string
	Amount   string
	Currency string
	Quantity int
	Reason   string
}

// Seeds are inputs at and across the edges of every value rule: lengths,
// character sets, line breaks and control characters, signs and scales.
func Seeds() []Values {
	return []Values{
		{"P-1001", "80.00", "CNY", 2, "CANCELLED_ON_REQUEST"},
		{"", "0", "cny", 0, ""},
		{"O/1", "0.00", "EURO", 1000001, strings.Repeat("é", 501)},
		{"a:b_c.d-e", "9999999999999999.99", "USD", 1000000, strings.Repeat("x", 500)},
		{strings.Repeat("i", 129), "10000000000000000", "US", -1, "\xff"},
		{"x\n", "01.5", "ABC\n", 1, "line\nbreak"},
		{"ИД", "1.005", "ÄBC", 7, "\u2028"},
		{"P-1", "1e3", " USD", 3, "ok"},
		{"P-\x00", "8\x000", "C\x00Y", 1, "a\x00b"},
		{"P-1", "80.00", "CNY", 1, "tab\there\r\n"},
		{"P-1", "80.00", "CNY", 1, "\x01\x1f\x7f"},
		{"P-1", "80.00", "CNY", 1, "c1 \u0080\u0085\u009f, not \u00a0"},
	}
}

// AddSeeds adds Seeds to the corpus of f, a fuzz target taking
// (id, amount, currency string, quantity int, reason string).
func AddSeeds(f *testing.F) {
	for _, v := range Seeds() {
		f.Add(v.ID, v.Amount, v.Currency, v.Quantity, v.Reason)
	}
}

// Quote is s as a JSON string, cut after 40 bytes, for a failure message
// that names a fuzzed input without printing all of it.
func Quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
