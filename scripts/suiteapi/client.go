// Package suiteapi is the one client of the suite's API: the HTTP API of
// README.md (API), the admin endpoints every service serves, /metrics, and
// the order-events topic as another producer writes to it. The drills, the
// black-box test harness and the load generator all speak to the suite
// through it, so a change of an endpoint or an answer is made once.
//
// Its names are the test vocabulary the tutorial and tests/ use: Publish,
// WaitConsumed, Snapshot, WaitFor, DLQCount, FailConsumer, … Every call
// returns an error instead of failing a test: tests/harness wraps it into
// t.Helper functions that fail the test, the drills turn it into a verdict.
package suiteapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The services, by the short names Config.URLs uses.
const (
	Order          = "order"
	Payment        = "payment"
	Inventory      = "inventory"
	Points         = "points"
	Notification   = "notification"
	Reconciliation = "reconciliation"
)

// Defaults of a Config.
const (
	DefaultTopic        = "order-events"
	DefaultDLQTopic     = "order-events.dlq"
	DefaultHTTPTimeout  = 10 * time.Second
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultWait bounds WaitConsumed and the waits that take no timeout.
	DefaultWait = 30 * time.Second
	// DefaultShedRetries is how many times a shed request is sent again:
	// with a Retry-After of a second, a call gives up after about five
	// seconds of a service at its capacity.
	DefaultShedRetries = 5
)

// maxAnswer bounds how much of an answer is read: the largest the suite
// gives (a reconciliation run over many orders) is far below it.
const maxAnswer = 4 << 20

// Config says where the suite is.
type Config struct {
	// URLs are the services' base URLs by short name (Order, Payment, …).
	URLs map[string]string
	// AdminToken is sent as a bearer token to /admin/* (ADMIN_TOKEN).
	AdminToken string
	// HTTPClient sends the calls; nil uses one with DefaultHTTPTimeout.
	HTTPClient *http.Client
	// Brokers are the Kafka bootstrap brokers Publish and the topic reads
	// use; only they need it.
	Brokers []string
	// Topic carries the order events; "" means DefaultTopic.
	Topic string
	// DLQTopic carries the consumers' dead letters; "" means
	// DefaultDLQTopic.
	DLQTopic string
	// PollInterval is how often a wait re-reads the suite; 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// ShedRetries is how many times a request answered 503 with
	// Retry-After is sent again, after the wait the answer asks for: the
	// suite answers so only a request of which nothing ran (shed at a
	// service's capacity, or a payment whose order look-up failed), and
	// the drills and tests send bursts a small admission limit sheds.
	// 0 means DefaultShedRetries; a negative value sends every request
	// once.
	ShedRetries int
}

// Client speaks to one suite. It is safe for concurrent use; Close
// releases its Kafka connection.
type Client struct {
	cfg Config

	mu    sync.Mutex
	kafka *kgo.Client
}

// New returns a client of the suite cfg describes.
func New(cfg Config) *Client {
	cfg.HTTPClient = cmp.Or(cfg.HTTPClient, &http.Client{Timeout: DefaultHTTPTimeout})
	cfg.Topic = cmp.Or(cfg.Topic, DefaultTopic)
	cfg.DLQTopic = cmp.Or(cfg.DLQTopic, DefaultDLQTopic)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.ShedRetries = cmp.Or(cfg.ShedRetries, DefaultShedRetries)
	return &Client{cfg: cfg}
}

// Close closes the Kafka client Publish opened, if any, and the idle
// HTTP connections.
func (c *Client) Close() {
	c.cfg.HTTPClient.CloseIdleConnections()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kafka != nil {
		c.kafka.Close()
		c.kafka = nil
	}
}

// URL is the base URL of a service, without a trailing slash.
func (c *Client) URL(service string) string { return strings.TrimRight(c.cfg.URLs[service], "/") }

// StatusError is an answer with a status the caller did not accept. The
// suite's errors are {"businessCode","message"}; BusinessCode and Message
// are empty when the body is not one.
type StatusError struct {
	Method, URL  string
	Status       int
	BusinessCode string
	Message      string
	// Body is the answer as it came, trimmed.
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s answered %d: %s", e.Method, e.URL, e.Status, e.Body)
}

// Explain adds to err, the error of a call, what the person running a
// command can do about it: an answer the suite refused shows its
// businessCode and message (its body when it has none), a 401 asks for the
// admin token, a service that cannot be reached asks whether the suite
// runs.
func Explain(err error) error {
	var se *StatusError
	var ue *url.Error
	switch {
	case errors.As(err, &se):
		msg := se.Body
		if se.Message != "" {
			msg = se.BusinessCode + ": " + se.Message
		}
		hint := ""
		if se.Status == http.StatusUnauthorized {
			hint = " (set ADMIN_TOKEN to the suite's admin token)"
		}
		return fmt.Errorf("%s %s: %d %s%s", se.Method, se.URL, se.Status, msg, hint)
	case errors.As(err, &ue):
		return fmt.Errorf("%w (is the suite running? make run)", err)
	}
	return err
}

// IsStatus reports whether err is a *StatusError with status code.
func IsStatus(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == code
}

// Raw sends a request and returns the status and body whatever the status:
// for tests that look at an answer the suite refuses. body is sent as is
// when it is []byte or string, as JSON otherwise; nil sends none. Admin
// paths carry the admin token. A command (POST, PUT, PATCH, DELETE other
// than the reconciliation views' look-ups) carries an Idempotency-Key,
// a fresh one per call unless header has one, and the same on each time
// it is sent again: a shed request is sent again (Config.ShedRetries), and
// the last answer is returned.
func (c *Client) Raw(ctx context.Context, service, method, path string, header http.Header, body any) (int, []byte, error) {
	code, _, raw, err := c.roundTrip(ctx, service, method, path, header, body, true)
	return code, raw, err
}

// roundTrip is Raw that also returns the answer's headers; keyed false
// sends a command without an Idempotency-Key unless header has one, as a
// client that sends none.
func (c *Client) roundTrip(ctx context.Context, service, method, path string, header http.Header, body any, keyed bool) (int, http.Header, []byte, error) {
	u := c.URL(service) + path
	if keyed && IsCommand(method, path) && header.Get(IdempotencyKeyHeader) == "" {
		key, err := NewIdempotencyKey()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		header = header.Clone()
		if header == nil {
			header = http.Header{}
		}
		header.Set(IdempotencyKeyHeader, key)
	}
	var payload []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		payload = b
	case string:
		payload = []byte(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("encode %s %s: %w", method, u, err)
		}
		payload = raw
	}
	// A loop of its own rather than go-retryablehttp, which would also
	// send again after a 5xx or a broken connection: the tests must see
	// those, and only an answer that says nothing of it ran is safe to
	// send again whatever the request.
	for attempt := 0; ; attempt++ {
		code, answer, raw, retryAfter, err := c.send(ctx, method, u, path, header, body != nil, payload)
		if err != nil || code != http.StatusServiceUnavailable || retryAfter < 0 || attempt >= c.cfg.ShedRetries {
			return code, answer, raw, err
		}
		t := time.NewTimer(retryAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return code, answer, raw, nil
		case <-t.C:
		}
	}
}

// IdempotencyKeyHeader carries the key that makes a command safe to send
// again (README.md, Retrying safely).
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader marks an answer a service gave again for a key it saw.
const ReplayedHeader = "Idempotent-Replayed"

// NewIdempotencyKey returns a fresh key: 128 random bits, as a UUID (v4).
func NewIdempotencyKey() (string, error) {
	key, err := uuid.NewRandom()
	if err != nil {
		return "", fmt.Errorf("idempotency key: %w", err)
	}
	return key.String(), nil
}

// IsCommand reports whether a request of method to path changes state, so
// that it carries an Idempotency-Key. The reconciliation views' POST
// /admin/reconciliation/orders is a look-up with a body, not a command.
func IsCommand(method, path string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	return path != "/admin/reconciliation/orders"
}

// send sends a request once. retryAfter is the answer's Retry-After, or
// -1 when it has none.
func (c *Client) send(ctx context.Context, method, u, path string, header http.Header, hasBody bool, payload []byte) (code int, answer http.Header, raw []byte, retryAfter time.Duration, err error) {
	var r io.Reader
	if hasBody {
		r = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return 0, nil, nil, -1, fmt.Errorf("%s %s: %w", method, u, err)
	}
	if header != nil {
		req.Header = header.Clone()
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.cfg.AdminToken != "" && strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+c.cfg.AdminToken)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, nil, -1, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	raw, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return resp.StatusCode, resp.Header, raw, -1, fmt.Errorf("%s %s: read answer: %w", method, u, err)
	}
	retryAfter = -1
	if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs >= 0 {
		retryAfter = time.Duration(secs) * time.Second
	}
	return resp.StatusCode, resp.Header, raw, retryAfter, nil
}

// Do sends a request and decodes a 2xx JSON answer into out (if not nil).
// A status other than 2xx and those in ok is a *StatusError; Do returns
// the status it got.
func (c *Client) Do(ctx context.Context, service, method, path string, header http.Header, body, out any, ok ...int) (int, error) {
	code, raw, err := c.Raw(ctx, service, method, path, header, body)
	if err != nil {
		return code, err
	}
	accepted := code/100 == 2
	for _, o := range ok {
		accepted = accepted || code == o
	}
	if !accepted {
		return code, statusError(method, c.URL(service)+path, code, raw)
	}
	if out != nil && code/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return code, fmt.Errorf("%s %s: answer is not the JSON expected: %w", method, c.URL(service)+path, err)
		}
	}
	return code, nil
}

// Call is Do without headers that accepts only 2xx.
func (c *Client) Call(ctx context.Context, service, method, path string, body, out any) error {
	_, err := c.Do(ctx, service, method, path, nil, body, out)
	return err
}

// call is Call that returns the answer as a T.
func call[T any](ctx context.Context, c *Client, service, method, path string, body any) (T, error) {
	var out T
	err := c.Call(ctx, service, method, path, body, &out)
	return out, err
}

// get is call of a GET.
func get[T any](ctx context.Context, c *Client, service, path string) (T, error) {
	return call[T](ctx, c, service, http.MethodGet, path, nil)
}

func statusError(method, u string, code int, raw []byte) *StatusError {
	var b struct {
		BusinessCode string `json:"businessCode"`
		Message      string `json:"message"`
	}
	_ = json.Unmarshal(raw, &b) // not every answer is the suite's error shape
	return &StatusError{Method: method, URL: u, Status: code, BusinessCode: b.BusinessCode, Message: b.Message,
		Body: string(bytes.TrimSpace(raw))}
}

// WaitFor polls cond until it holds and returns how long that took. It
// fails after timeout, naming what and cond's last error, or when ctx ends.
func (c *Client) WaitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) (time.Duration, error) {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(c.cfg.PollInterval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok && err == nil {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-deadline.C:
			if err != nil {
				return time.Since(start), fmt.Errorf("%s: not within %s (last: %w)", what, timeout, err)
			}
			return time.Since(start), fmt.Errorf("%s: not within %s", what, timeout)
		case <-tick.C:
		}
	}
}
