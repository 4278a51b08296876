package harness

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// Contract is the tests' HTTP transport: it checks every answer a
// service gives them against the OpenAPI document the same service serves
// at /openapi.json (pkg/apispec), and fails the test on an answer the
// document does not describe. Each document is thereby held to the
// answers of every scenario the tests run, error answers included, not
// only to the routes it lists (docs/testing.md, The HTTP contract).
type Contract struct {
	tb   Reporter
	next http.RoundTripper

	mu         sync.Mutex
	validators map[string]validator.Validator // by host:port
	checked    atomic.Int64
}

// Reporter is where Contract reports an answer outside its document: a
// *testing.T.
type Reporter interface {
	Errorf(format string, args ...any)
}

// NewContract returns a Contract sending through next and reporting to tb.
func NewContract(tb Reporter, next http.RoundTripper) *Contract {
	return &Contract{tb: tb, next: next, validators: map[string]validator.Validator{}}
}

// Checked is how many answers were validated, so a test can tell the
// check ran.
func (c *Contract) Checked() int64 { return c.checked.Load() }

// RoundTrip sends req and validates its answer.
func (c *Contract) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil || req.URL.Path == "/openapi.json" || req.URL.Path == "/metrics" {
		return resp, err
	}
	v := c.validator(req)
	if v == nil {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	checked := *resp
	checked.Body = io.NopCloser(bytes.NewReader(body))
	if ok, errs := v.ValidateHttpResponse(req, &checked); !ok {
		var msgs []string
		for _, e := range errs {
			msg := e.Message
			if e.Reason != "" {
				msg += ": " + e.Reason
			}
			for _, se := range e.SchemaValidationErrors {
				msg += fmt.Sprintf(" [%s: %s]", se.FieldPath, se.Reason)
			}
			msgs = append(msgs, msg)
		}
		c.tb.Errorf("%s %s answered %d %s, which its service's OpenAPI document does not describe: %s",
			req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(body), strings.Join(msgs, "; "))
	}
	c.checked.Add(1)
	return resp, nil
}

// validator returns the validator of the document req's service serves,
// fetching it on first use; nil when the service cannot give it now (it
// is stopped, say), so the answer goes unchecked rather than the test
// failing for the fetch.
func (c *Contract) validator(req *http.Request) validator.Validator {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.validators[req.URL.Host]; ok {
		return v
	}
	get, err := http.NewRequestWithContext(req.Context(), http.MethodGet,
		req.URL.Scheme+"://"+req.URL.Host+"/openapi.json", nil)
	if err != nil {
		return nil
	}
	resp, err := c.next.RoundTrip(get)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	doc, err := libopenapi.NewDocument(raw)
	if err != nil {
		c.tb.Errorf("%s/openapi.json: %v", req.URL.Host, err)
		return nil
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		c.tb.Errorf("%s/openapi.json: %v", req.URL.Host, errs)
		return nil
	}
	c.validators[req.URL.Host] = v
	return v
}
