package service

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/event"
)

// MinSecretBytes is the shortest CALLBACK_SECRET or ADMIN_TOKEN accepted
// outside development mode: SHA-256's output size (`openssl rand -hex 32`
// prints 64 characters).
const MinSecretBytes = 32

// DevCallbackSecret is the CALLBACK_SECRET of development mode when none is
// set. It is published, so any other mode refuses it.
const DevCallbackSecret = "dev-callback-secret"

// isPublished reports whether v is a secret printed in this repository
// (development defaults, compose and test values): anyone can read it, so
// it protects nothing.
func isPublished(v string) bool {
	switch v {
	case DevCallbackSecret, "dev-admin-token", "test-callback-secret", "test-admin-token", "changeme", "secret":
		return true
	}
	return false
}

// Development reports SUITE_MODE=development: the published development
// secrets are accepted and ADMIN_TOKEN may be empty on loopback.
func (c Config) Development() bool {
	return c.Mode == ModeDevelopment
}

func (c Config) validateMode() error {
	if c.Mode != ModeProduction && c.Mode != ModeDevelopment {
		return fmt.Errorf("SUITE_MODE=%q: want %s or %s", c.Mode, ModeProduction, ModeDevelopment)
	}
	return nil
}

// CheckSecret reports why the value of the variable name cannot be a
// secret outside development mode: unset, shorter than MinSecretBytes, or
// published. The error names the variable, never the value.
func CheckSecret(name, value string) error {
	switch {
	case value == "":
		return fmt.Errorf("%s is not set: generate one (openssl rand -hex 32), or run with SUITE_MODE=development on this machine only", name)
	case isPublished(value):
		return fmt.Errorf("%s is a published development value: generate one (openssl rand -hex 32)", name)
	case len(value) < MinSecretBytes:
		return fmt.Errorf("%s is %d bytes: want at least %d (openssl rand -hex 32)", name, len(value), MinSecretBytes)
	}
	return nil
}

// validateAdmin checks ADMIN_TOKEN: any value outside development mode must
// pass CheckSecret, and even in development mode a service reachable
// beyond this machine needs one.
func (c Config) validateAdmin() error {
	if !c.Development() {
		return CheckSecret("ADMIN_TOKEN", c.AdminToken)
	}
	if c.AdminToken == "" && !IsLoopback(c.HTTPAddr) {
		return fmt.Errorf("ADMIN_TOKEN is not set and HTTP_ADDR=%q listens beyond loopback: set ADMIN_TOKEN, or listen on 127.0.0.1", c.HTTPAddr)
	}
	return nil
}

// IsLoopback reports whether the listen address addr (host:port) accepts
// connections from this machine only. An empty host listens on every
// interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CallbackConfig is how payment callbacks are signed and verified
// (docs/security.md), read by the payment service, which signs, and the
// order service, which verifies.
type CallbackConfig struct {
	// Secret signs, and verifies (CALLBACK_SECRET).
	Secret string
	// Previous are still accepted for verification while the secret is
	// rotated (CALLBACK_SECRET_PREVIOUS, comma-separated).
	Previous []string
	// ReplayWindow is how far a callback's timestamp may be from the
	// receiver's clock (CALLBACK_REPLAY_WINDOW).
	ReplayWindow time.Duration
	// Development accepts the published development secret, the default
	// of CALLBACK_SECRET in that mode.
	Development bool
}

// ReadCallbackConfig reads CALLBACK_SECRET, CALLBACK_SECRET_PREVIOUS (each
// also from a file, envconfig.Reader.Secret) and CALLBACK_REPLAY_WINDOW
// through r; shared is the service's Config, whose
// mode decides the default secret.
func ReadCallbackConfig(r *envconfig.Reader, shared Config) CallbackConfig {
	def := ""
	if shared.Development() {
		def = DevCallbackSecret
	}
	return CallbackConfig{
		Secret:       r.Secret("CALLBACK_SECRET", def),
		Previous:     r.SecretList("CALLBACK_SECRET_PREVIOUS", nil),
		ReplayWindow: r.Duration("CALLBACK_REPLAY_WINDOW", event.DefaultReplayWindow),
		Development:  shared.Development(),
	}
}

// Validate reports every unusable setting, naming its variable.
func (c CallbackConfig) Validate() error {
	var errs []error
	if c.Development {
		if c.Secret == "" {
			errs = append(errs, errors.New("CALLBACK_SECRET is empty"))
		}
	} else {
		errs = append(errs, CheckSecret("CALLBACK_SECRET", c.Secret))
		for _, p := range c.Previous {
			errs = append(errs, CheckSecret("CALLBACK_SECRET_PREVIOUS", p))
		}
	}
	if c.ReplayWindow < time.Second || c.ReplayWindow > time.Hour {
		errs = append(errs, fmt.Errorf("CALLBACK_REPLAY_WINDOW=%s: want 1s to 1h", c.ReplayWindow))
	}
	return errors.Join(errs...)
}

// Secrets are the keys a receiver accepts: the current secret first, then
// the previous ones.
func (c CallbackConfig) Secrets() [][]byte {
	out := [][]byte{[]byte(c.Secret)}
	for _, p := range c.Previous {
		out = append(out, []byte(p))
	}
	return out
}
