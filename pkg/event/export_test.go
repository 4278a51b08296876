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
