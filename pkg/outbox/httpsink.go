package outbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// SignatureHeader carries the HMAC-SHA256 of a callback body:
// "sha256=<hex>".
const SignatureHeader = "X-Signature"

// Sign returns the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify reports whether signature is body's signature under secret, in
// constant time.
func Verify(secret, body []byte, signature string) bool {
	want := Sign(secret, body)
	return hmac.Equal([]byte(want), []byte(strings.TrimSpace(signature)))
}

// HTTPSink POSTs each row's payload, signed, to one URL; a 2xx answer is
// the acknowledgement. Rows are sent one at a time, in order, and the first
// failure stops the batch so no later row overtakes it.
type HTTPSink struct {
	client *http.Client
	url    string
	secret []byte
}

// NewHTTPSink returns a sink posting to url with bodies signed by secret.
func NewHTTPSink(client *http.Client, url string, secret []byte) *HTTPSink {
	return &HTTPSink{client: client, url: url, secret: secret}
}

// Send posts msgs in order until one fails.
func (s *HTTPSink) Send(ctx context.Context, msgs []Message) (int, error) {
	for i, m := range msgs {
		if err := s.post(ctx, m); err != nil {
			return i, err
		}
	}
	return len(msgs), nil
}

func (s *HTTPSink) post(ctx context.Context, m Message) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(m.Payload))
	if err != nil {
		return fmt.Errorf("callback request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(s.secret, m.Payload))
	for k, v := range m.Headers {
		req.Header.Set("X-"+k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("callback %s: %w", m.EventID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("callback %s: %s: %s", m.EventID, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}
