// Package envconfig reads typed settings through a getenv function.
//
// Services receive getenv as an argument of run (so tests pass a map), which
// rules out libraries that read os.Environ themselves; this small reader
// collects every malformed value so a service reports all of them at once.
//
// A secret may also come from a file: Secret and SecretList read key K from
// the file K_FILE names, the convention of the official container images
// (POSTGRES_PASSWORD_FILE), so a container's environment, which
// `docker inspect` prints, holds a path and never the value.
package envconfig

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// FileSuffix turns a key into the variable naming a file that holds its
// value: ADMIN_TOKEN_FILE for ADMIN_TOKEN.
const FileSuffix = "_FILE"

// Reader reads typed values and remembers every malformed one.
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New returns a Reader over getenv.
func New(getenv func(string) string) *Reader {
	return &Reader{getenv: getenv}
}

// String returns the value of key, or def when it is unset or empty.
func (r *Reader) String(key, def string) string {
	if v := strings.TrimSpace(r.getenv(key)); v != "" {
		return v
	}
	return def
}

// List returns the comma-separated values of key, or def.
func (r *Reader) List(key string, def []string) []string {
	v := r.String(key, "")
	if v == "" {
		return def
	}
	return Split(v)
}

// Split returns the non-empty, trimmed items of a comma-separated list: a
// flag's value reads like the setting it overrides, so "a, b,,c" is three
// items there too.
func Split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Secret returns the value of key, or of the file key+FileSuffix names, or
// def when neither is set. The file's content is the value as written, one
// trailing newline (LF or CRLF) removed, since `echo` and editors add one;
// other whitespace is kept, a secret may hold it. Both variables set, a
// file that cannot be read and an empty one are malformed: a secret file
// that is named is meant to be used. The error names the variables and the
// path, never the value.
func (r *Reader) Secret(key, def string) string {
	fileKey := key + FileSuffix
	v := strings.TrimSpace(r.getenv(key))
	path := strings.TrimSpace(r.getenv(fileKey))
	switch {
	case path == "" && v == "":
		return def
	case path == "":
		return v
	case v != "":
		r.errs = append(r.errs, fmt.Errorf("%s and %s are both set: set one", key, fileKey))
		return def
	}
	b, err := os.ReadFile(path)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: %w", fileKey, path, err))
		return def
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	if s == "" {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: the file is empty", fileKey, path))
		return def
	}
	return s
}

// SecretList returns the comma-separated values of key, or of the file
// key+FileSuffix names (Secret), or def.
func (r *Reader) SecretList(key string, def []string) []string {
	v := r.Secret(key, "")
	if v == "" {
		return def
	}
	return Split(v)
}

// Int returns the integer value of key, or def.
func (r *Reader) Int(key string, def int) int {
	v := r.String(key, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: not an integer", key, v))
		return def
	}
	return n
}

// Duration returns the duration value of key (Go syntax, e.g. "1s"), or def.
func (r *Reader) Duration(key string, def time.Duration) time.Duration {
	v := r.String(key, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: not a duration like 1s or 250ms", key, v))
		return def
	}
	return d
}

// URL returns the absolute http(s) URL of key without a trailing slash, so
// paths can be appended, or def. Anything else is malformed: a service
// learns of a mistyped peer address at start, not at its first call.
func (r *Reader) URL(key, def string) string {
	v := strings.TrimRight(r.String(key, def), "/")
	if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: want an absolute http(s) URL", key, v))
	}
	return v
}

// Err reports every malformed value read so far.
func (r *Reader) Err() error {
	return errors.Join(r.errs...)
}

// Bool returns the boolean value of key ("true", "false", "1", "0", …), or
// def.
func (r *Reader) Bool(key string, def bool) bool {
	v := r.String(key, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: want true or false", key, v))
		return def
	}
	return b
}
