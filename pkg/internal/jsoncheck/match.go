package jsoncheck

import "bytes"

// A pattern of the schemas that a hand-written matcher answers: Go's
// regexp costs more than the rest of a check, and these few patterns are
// the contract's value rules, evaluated on every field of every event.
// pkg/event's TestPatternMatchersAgreeWithRegexp keeps each equal to the regexp
// compiled from its pattern; any other pattern is matched by that regexp.
const (
	patternID             = `^[A-Za-z0-9._:-]{1,128}$`
	patternAmount         = `^(0|[1-9][0-9]{0,15})(\.[0-9]{1,2})?$`
	patternPositiveAmount = `^(0\.(0[1-9]|[1-9][0-9]?)|[1-9][0-9]{0,15}(\.[0-9]{1,2})?)$`
	patternCurrency       = `^[A-Z]{3}$`
	patternTraceID        = `^[0-9a-f]{16,32}$`
	patternUTC            = `Z$`
	patternText           = `^[^\x00-\x1F\x7F-\x9F]*$`
)

// MatchedPatterns are the patterns with a hand-written matcher.
func MatchedPatterns() []string {
	return []string{patternID, patternAmount, patternPositiveAmount, patternCurrency, patternTraceID, patternUTC, patternText}
}

// Matcher returns the hand-written matcher of pattern, or nil.
func Matcher(pattern string) func([]byte) bool {
	switch pattern {
	case patternID:
		return matchID
	case patternAmount:
		return matchAmount
	case patternPositiveAmount:
		return matchPositiveAmount
	case patternCurrency:
		return matchCurrency
	case patternTraceID:
		return matchTraceID
	case patternUTC:
		return matchUTC
	case patternText:
		return matchText
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func allDigits(s []byte) bool {
	for _, c := range s {
		if !isDigit(c) {
			return false
		}
	}
	return true
}

func matchID(s []byte) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for _, c := range s {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || isDigit(c) || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// wholeDigits is [1-9][0-9]{0,15}.
func wholeDigits(s []byte) bool {
	return len(s) >= 1 && len(s) <= 16 && s[0] != '0' && allDigits(s)
}

// cents is [0-9]{1,2}.
func cents(s []byte) bool { return len(s) >= 1 && len(s) <= 2 && allDigits(s) }

func matchAmount(s []byte) bool {
	whole, frac, dot := bytes.Cut(s, []byte("."))
	if string(whole) != "0" && !wholeDigits(whole) {
		return false
	}
	return !dot || cents(frac)
}

func matchPositiveAmount(s []byte) bool {
	whole, frac, dot := bytes.Cut(s, []byte("."))
	if string(whole) == "0" {
		// 0\.(0[1-9]|[1-9][0-9]?)
		if !dot || !cents(frac) {
			return false
		}
		if frac[0] == '0' {
			return len(frac) == 2 && frac[1] != '0'
		}
		return true
	}
	return wholeDigits(whole) && (!dot || cents(frac))
}

func matchCurrency(s []byte) bool {
	return len(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z'
}

func matchTraceID(s []byte) bool {
	if len(s) < 16 || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func matchUTC(s []byte) bool { return len(s) > 0 && s[len(s)-1] == 'Z' }

// matchText refuses a control character (Unicode category Cc): a byte
// below 0x20, DEL, or C2 80–C2 9F, the only UTF-8 encoding of U+0080 to
// U+009F. Any other byte, invalid UTF-8 included, is a character the
// regexp reads as outside the class (invalid bytes as U+FFFD).
func matchText(s []byte) bool {
	for i, c := range s {
		switch {
		case c < 0x20 || c == 0x7F:
			return false
		case c == 0xC2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9F:
			return false
		}
	}
	return true
}
