// Package controlapi is the HTTP client of the `make run` runner's control
// API (CONTROL_ADDR, README.md (Drills)) and the types of its requests and
// answers, which the runner (scripts/devrun) writes: shared by the
// drills (scripts/drill) and the backlog drill (scripts/backlog), which each
// declare the small interfaces they need, and the console
// (services/console), which shows and flips its switches.
package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxAnswer bounds an answer read from the control API.
const maxAnswer = 4 << 20

// Client sends requests to one runner's control API.
type Client struct {
	base string
	http *http.Client
}

// New returns a client of the control API at baseURL
// ("http://127.0.0.1:8090"). timeout bounds one request: a restart or a
// scale answers once the processes are ready, a wait once one has exited,
// so it should be generous.
func New(baseURL string, timeout time.Duration) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: timeout}}
}

// StatusError is an answer other than 200 OK, with the message the runner
// gave.
type StatusError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("control API %s %s: %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// call is Do of a request whose answer is a T.
func call[T any](ctx context.Context, c *Client, method, path string, body any) (T, error) {
	var out T
	err := c.Do(ctx, method, path, body, &out)
	return out, err
}

// Do sends a request with body encoded as JSON (none when body is nil) and
// decodes a 200 answer into out (ignored when out is nil). Any other status
// is a *StatusError.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("control API %s %s: %w", method, path, err)
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return err
	}
	if method != http.MethodGet && method != http.MethodHead {
		// The runner refuses a change without it, even an empty one
		// (docs/security.md, The runner's control API).
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("control API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return &StatusError{Method: method, Path: path, Status: resp.StatusCode, Message: e.Error}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("control API %s %s: %w", method, path, err)
		}
	}
	return nil
}
