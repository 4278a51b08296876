package httpapi_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

// chunked hides a body's length, as a chunked request's is.
type chunked struct{ io.Reader }

// TestChangesComeAsJSONFromTheServicesOwnOrigin: what a web page could
// make a browser send — a change with a body that is not JSON or comes
// from another origin, or, to a development service on loopback, any
// request to a name that is not loopback — is refused before the handler
// runs; what the suite's clients send passes.
func TestChangesComeAsJSONFromTheServicesOwnOrigin(t *testing.T) {
	const jsonType = "application/json"
	tests := []struct {
		name        string
		loopback    bool // Config.LoopbackHostOnly
		method      string
		host        string // empty: 127.0.0.1:8081
		contentType string
		origin      string
		body        string
		chunked     bool
		status      int
		code        string
	}{
		{name: "JSON without Origin", method: "POST", contentType: jsonType, body: `{}`, status: 200},
		{name: "JSON with parameters", method: "POST", contentType: "application/json; charset=utf-8", body: `{}`, status: 200},
		{name: "JSON in upper case", method: "POST", contentType: "Application/JSON", body: `{}`, status: 200},
		{name: "JSON from the same origin", method: "POST", contentType: jsonType, origin: "http://127.0.0.1:8081", body: `{}`, status: 200},
		{name: "JSON from the same https origin", method: "PUT", host: "order.example.com", contentType: jsonType, origin: "https://order.example.com", body: `{}`, status: 200},
		{name: "bodiless POST without Content-Type", method: "POST", status: 200},
		{name: "bodiless chunked POST without Content-Type", method: "POST", chunked: true, status: 200},
		{name: "bodiless DELETE", method: "DELETE", status: 200},
		{name: "text/plain", method: "POST", contentType: "text/plain", body: `{}`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "form", method: "POST", contentType: "application/x-www-form-urlencoded", body: `a=1`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "multipart", method: "PATCH", contentType: "multipart/form-data; boundary=x", body: `--x--`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "a body without Content-Type", method: "POST", body: `{}`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "a chunked body without Content-Type", method: "PUT", body: `{}`, chunked: true, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "a JSON look-alike type", method: "POST", contentType: "application/jsonp", body: `{}`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "a malformed type", method: "POST", contentType: "application/json; =", body: `{}`, status: 415, code: httpapi.CodeUnsupportedMediaType},
		{name: "foreign Origin", method: "POST", contentType: jsonType, origin: "http://evil.example", body: `{}`, status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "foreign Origin without a body", method: "POST", origin: "http://evil.example", status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "foreign Origin, no Content-Type (no-cors fetch)", method: "POST", origin: "http://evil.example", body: `{}`, status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "Origin at another port", method: "DELETE", origin: "http://127.0.0.1:8082", status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "Origin of another scheme", method: "POST", contentType: jsonType, origin: "ftp://127.0.0.1:8081", body: `{}`, status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "null Origin", method: "POST", contentType: jsonType, origin: "null", body: `{}`, status: 403, code: httpapi.CodeForbiddenOrigin},
		{name: "foreign Origin on a read", method: "GET", origin: "http://evil.example", status: 200},
		{name: "foreign Host outside development", method: "POST", host: "order:8081", contentType: jsonType, body: `{}`, status: 200},
		{name: "foreign Host in development", loopback: true, method: "POST", host: "evil.example:8081", contentType: jsonType, body: `{}`, status: 403, code: httpapi.CodeForbiddenHost},
		{name: "foreign Host on a read in development", loopback: true, method: "GET", host: "evil.example:8081", status: 403, code: httpapi.CodeForbiddenHost},
		{name: "rebound Host and its own Origin in development", loopback: true, method: "POST", host: "evil.example:8081", contentType: jsonType, origin: "http://evil.example:8081", body: `{}`, status: 403, code: httpapi.CodeForbiddenHost},
		{name: "localhost in development", loopback: true, method: "POST", host: "localhost:8081", contentType: jsonType, origin: "http://localhost:8081", body: `{}`, status: 200},
		{name: "127.0.0.2 without a port in development", loopback: true, method: "GET", host: "127.0.0.2", status: 200},
		{name: "IPv6 loopback in development", loopback: true, method: "GET", host: "[::1]:8081", status: 200},
		{name: "a name ending in localhost in development", loopback: true, method: "GET", host: "localhost.evil.example:8081", status: 403, code: httpapi.CodeForbiddenHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := httpapi.New(httpapi.Config{LoopbackHostOnly: tt.loopback}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ran := false
			handle := func(c echo.Context) error {
				ran = true
				var v map[string]any
				if err := httpapi.BindOptional(c, &v); err != nil {
					return err
				}
				return c.JSON(http.StatusOK, map[string]string{"businessCode": httpapi.CodeSuccess})
			}
			s.Echo.Any("/things", handle)
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			if tt.chunked {
				body = chunked{strings.NewReader(tt.body)}
			}
			req := httptest.NewRequest(tt.method, "/things", body)
			if tt.chunked {
				req.ContentLength = -1
			}
			req.Host = tt.host
			if req.Host == "" {
				req.Host = "127.0.0.1:8081"
			}
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			rec := httptest.NewRecorder()
			s.Echo.ServeHTTP(rec, req)
			var got httpapi.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("answer %d is not JSON: %s", rec.Code, rec.Body)
			}
			if rec.Code != tt.status {
				t.Fatalf("answer %d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.status != http.StatusOK {
				if got.BusinessCode != tt.code || got.Message == "" {
					t.Fatalf("answer %s, want businessCode %s and a message", rec.Body, tt.code)
				}
				if ran {
					t.Fatal("the handler ran")
				}
			}
		})
	}
}
