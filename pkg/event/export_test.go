package event

import "io/fs"

// ParseReference is Parse as the generic JSON Schema validator answers it:
// the reference the compiled checkers must agree with.
func ParseReference(raw []byte) (Envelope, error) { return parseReference(raw) }

// ValidateReference is Validate as the generic JSON Schema validator
// answers it.
func ValidateReference(raw []byte) error { return validateReference(raw) }

// CompileCheckers compiles the schemas under schemas/ in fsys as Parse
// compiles the embedded ones.
func CompileCheckers(fsys fs.FS) error {
	_, err := compileCheckersFrom(fsys)
	return err
}

// PatternMatcher is the hand-written matcher of pattern, or nil.
func PatternMatcher(pattern string) func([]byte) bool { return handMatcher(pattern) }

// MatchedPatterns are the patterns with a hand-written matcher.
func MatchedPatterns() []string {
	return []string{patternID, patternAmount, patternPositiveAmount, patternCurrency, patternTraceID, patternUTC, patternText}
}

// CheckRuleReference is a value rule function's answer as the generic JSON
// Schema validator evaluates definition rule over v, a value as JSON
// decodes it (string, json.Number): the reference ValidateID and the
// others must agree with. got is how a refused value is quoted back.
func CheckRuleReference(field, rule string, v any, got string) error {
	return checkRuleReference(field, rule, v, got)
}
