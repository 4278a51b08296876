package service

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// DefaultOrderServiceTimeout bounds one call to the order service, a
// callback or a command.
const DefaultOrderServiceTimeout = 5 * time.Second

// DefaultOrderURL is ORDER_URL when none is set: the order service of the
// development setup.
const DefaultOrderURL = "http://127.0.0.1:8081"

// CallbackSenderConfig is how a service that tells the order service what
// became of an order (payment, inventory) reaches it: where, the secret
// its callbacks are signed with, how long one call may take, and how the
// outbox relay retries a callback the order service did not take.
type CallbackSenderConfig struct {
	// OrderURL is the order service's base URL (ORDER_URL).
	OrderURL string
	// Callbacks signs every callback (CALLBACK_SECRET and the rest of
	// ReadCallbackConfig).
	Callbacks CallbackConfig
	// Timeout bounds one call to the order service.
	Timeout time.Duration
	// Relay delivers the callbacks from the outbox and retries them with
	// backoff (OUTBOX_*).
	Relay outbox.RelayConfig
}

// ReadCallbackSenderConfig reads ORDER_URL, the callback secrets and the
// relay's settings through r; shared is the service's Config, whose mode
// decides the default secret.
func ReadCallbackSenderConfig(r *envconfig.Reader, shared Config) CallbackSenderConfig {
	return CallbackSenderConfig{
		OrderURL:  r.URL("ORDER_URL", DefaultOrderURL),
		Callbacks: ReadCallbackConfig(r, shared),
		Timeout:   DefaultOrderServiceTimeout,
		Relay:     outbox.ReadRelayEnv(r),
	}
}

// Validate reports every unusable setting, naming its variable.
func (c CallbackSenderConfig) Validate() error {
	var errs []error
	if c.OrderURL == "" {
		errs = append(errs, errors.New("ORDER_URL is empty"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("order service timeout %s: want more than 0", c.Timeout))
	}
	return errors.Join(append(errs, c.Callbacks.Validate(), c.Relay.Validate())...)
}

// Client returns an HTTP client for the order service whose every call is
// bounded by Timeout and which keeps idle connections for inFlight calls
// at once (Go's default keeps two). Each call continues the trace of its
// context (httpapi.TracedTransport).
func (c CallbackSenderConfig) Client(inFlight int) *http.Client {
	return &http.Client{Timeout: c.Timeout, Transport: httpapi.TracedTransport(httpapi.ClientTransport(inFlight))}
}

// Sink returns the relay's sink of callbacks: each signed with the
// callback secret and posted over client to path under OrderURL.
func (c CallbackSenderConfig) Sink(client *http.Client, path string) *outbox.HTTPSink {
	return outbox.NewHTTPSink(client, strings.TrimRight(c.OrderURL, "/")+path, []byte(c.Callbacks.Secret))
}

// SenderConfig is the environment of a consumer service that sends
// callbacks to the order service (payment, inventory): what every consumer
// shares, and how it reaches the order service.
type SenderConfig struct {
	ConsumerConfig
	CallbackSenderConfig
}

// Validate reports every unusable setting, naming its variable.
func (c SenderConfig) Validate() error {
	return errors.Join(c.ConsumerConfig.Validate(), c.CallbackSenderConfig.Validate())
}

// LoadSenderConfig reads and checks the environment of a consumer service
// that sends callbacks, when it has no other settings of its own.
func LoadSenderConfig(getenv func(string) string, id Identity) (SenderConfig, error) {
	r := envconfig.New(getenv)
	shared := ReadConsumerConfig(r, id)
	cfg := SenderConfig{ConsumerConfig: shared, CallbackSenderConfig: ReadCallbackSenderConfig(r, shared.Config)}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return SenderConfig{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}
