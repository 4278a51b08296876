// Package idempotency makes a service's state-changing routes safe to
// retry with the Idempotency-Key header (the IETF HTTP API draft "The
// Idempotency-Key HTTP Header Field", as payment providers such as Stripe
// implement it): the key's first request runs and its answer is kept in
// the service's own database for a window (IDEMPOTENCY_KEY_TTL); the same
// key with the same request gets that answer again, marked
// Idempotent-Replayed, and changes nothing; the same key with another
// request is a 422, and while the first still runs a 409. A request
// without the header is served as before. docs/decisions.md (Idempotent
// commands) gives the reasoning.
package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer sent again from a key's stored answer.
const ReplayedHeader = "Idempotent-Replayed"

// MaxKeyLength is the longest key accepted (Stripe's bound).
const MaxKeyLength = 255

// Business codes of the answers the middleware gives itself.
const (
	// CodeKeyInvalid: the header is empty, too long, repeated or carries
	// characters other than printable ASCII (400).
	CodeKeyInvalid = "IDEMPOTENCY_KEY_INVALID"
	// CodeKeyReused: the key was sent before with another request (422).
	CodeKeyReused = "IDEMPOTENCY_KEY_REUSED"
	// CodeKeyInUse: the key's first request is still running (409).
	CodeKeyInUse = "IDEMPOTENCY_KEY_IN_USE"
)

// Defaults of Config.
const (
	// DefaultTTL is how long a key is kept: a day, as Stripe keeps them,
	// long enough for any client's retries and a day of outage between.
	DefaultTTL = 24 * time.Hour
	// DefaultLockTimeout is how long a running key refuses a second
	// request with 409 before a retry may run the request again: longer
	// than a request can run (the server's 45 s write timeout, the
	// database's 30 s statement timeout), so only a run that died without
	// an answer is taken over.
	DefaultLockTimeout = 60 * time.Second
	// DefaultSweepInterval is how often expired keys are deleted.
	DefaultSweepInterval = time.Minute
	// MinTTL bounds IDEMPOTENCY_KEY_TTL from below: a key must outlive its
	// lock, and a client's retries take minutes.
	MinTTL = 5 * time.Minute
	// MaxTTL bounds IDEMPOTENCY_KEY_TTL from above: the table holds every
	// keyed answer of the window.
	MaxTTL = 30 * 24 * time.Hour
)

// Config is how long keys are kept and held.
type Config struct {
	// TTL (IDEMPOTENCY_KEY_TTL) is how long a key and its answer are kept
	// from its first request; the sweeper deletes it after.
	TTL time.Duration
	// LockTimeout is how long a key stays running before a retry may take
	// it over.
	LockTimeout time.Duration
	// SweepInterval is how often RunSweeper deletes expired keys.
	SweepInterval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// ReadConfig reads IDEMPOTENCY_KEY_TTL through r.
func ReadConfig(r *envconfig.Reader) Config {
	return Config{TTL: r.Duration("IDEMPOTENCY_KEY_TTL", DefaultTTL)}
}

// Validate reports every unusable setting, naming its variable; a zero
// TTL is DefaultTTL.
func (c Config) Validate() error {
	if c.TTL != 0 && (c.TTL < MinTTL || c.TTL > MaxTTL) {
		return fmt.Errorf("IDEMPOTENCY_KEY_TTL=%s: want %s to %s", c.TTL, MinTTL, MaxTTL)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.LockTimeout <= 0 {
		c.LockTimeout = DefaultLockTimeout
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ParseKey checks the values of the Idempotency-Key header: exactly one,
// 1 to MaxKeyLength printable ASCII characters. The draft sends the key as
// a Structured Field string ("..."), clients such as Stripe's bare: both
// are accepted, the quotes not part of the key.
func ParseKey(values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("want one %s header, got %d", Header, len(values))
	}
	key := values[0]
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	if key == "" {
		return "", errors.New("the key is empty")
	}
	if len(key) > MaxKeyLength {
		return "", fmt.Errorf("the key has %d characters; at most %d are allowed", len(key), MaxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if b := key[i]; b < 0x20 || b > 0x7e {
			return "", fmt.Errorf("the key has a character other than printable ASCII at %d", i)
		}
	}
	return key, nil
}

// Fingerprint identifies a request's content: its method, path with query
// and body, hashed (SHA-256). The same key with another fingerprint is
// another request.
func Fingerprint(method, requestURI string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(requestURI))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// requestKey is the context key of the keyed request being run.
type requestKey struct{}

func withRequest(ctx context.Context, r Request) context.Context {
	return context.WithValue(ctx, requestKey{}, r)
}

// DerivedID returns prefix and a UUID derived from the key, scope and
// fingerprint of the keyed request ctx serves, and false when it carries
// none. A handler that creates something names it so: a request that runs
// again with the same key and content (after its first run died without
// an answer, or after the key expired) then finds what the first run
// created instead of creating it twice.
func DerivedID(ctx context.Context, prefix string) (string, bool) {
	r, ok := ctx.Value(requestKey{}).(Request)
	if !ok {
		return "", false
	}
	id := uuid.NewSHA1(uuid.Nil, []byte(r.Scope+"\x00"+r.Key+"\x00"+r.Fingerprint))
	return prefix + id.String(), true
}
