package jsoncheck

import "strings"

// PatternInputs is every string of up to combos characters over the
// characters the patterns treat differently, and strings at each
// pattern's length limits: the inputs a hand-written matcher must answer
// as the regexp does, and the texts pkg/rules' tests hold the value
// rules to the reference validator over.
func PatternInputs(combos int) []string {
	alphabet := []string{"0", "1", "9", "a", "f", "g", "z", "A", "F", "Z", ".", "-", "_", ":", "/", " ", "\n", "é", "\xff", "\x00", "\t", "\x7f", "\u0085", "\u00a0", "\xc2"}
	out := []string{""}
	level := []string{""}
	for range combos {
		var next []string
		for _, prefix := range level {
			for _, c := range alphabet {
				next = append(next, prefix+c)
			}
		}
		out = append(out, next...)
		level = next
	}
	// The edges of the control characters, alone and inside text, and the
	// byte sequences around C1's two-byte encoding.
	for _, c := range []string{"\x01", "\x1f", "\x20", "\x7e", "\u0080", "\u009f", "\u00a0", "\u2028", "\xc2\x7f", "\xc2\xc0", "\xc0\x80", "\xc2"} {
		out = append(out, c, "a"+c+"b", c+c)
	}
	for n := 14; n <= 34; n++ {
		for _, c := range []string{"a", "0", "f", "g", "A"} {
			out = append(out, strings.Repeat(c, n), strings.Repeat("a", n-1)+c, c+strings.Repeat("0", n-1))
		}
	}
	for _, n := range []int{126, 127, 128, 129, 130} {
		out = append(out, strings.Repeat("i", n), strings.Repeat("i", n-1)+"/", strings.Repeat("é", n))
	}
	for n := range 19 {
		for _, lead := range []string{"", "0", "1", "9"} {
			whole := lead + strings.Repeat("0", n)
			for _, frac := range []string{"", ".", ".0", ".00", ".01", ".10", ".1", ".9", ".99", ".000", ".5x", "..1", ".1.1"} {
				out = append(out, whole+frac, "-"+whole+frac, whole+frac+"\n")
			}
		}
	}
	return out
}
