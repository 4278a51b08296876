package httpapi_test

import (
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
)

// FuzzGuardOrigin sends any method, Host, Content-Type, Origin and body:
// the answer is a 2xx or a 4xx with a businessCode, and a change reaches
// the handler only as JSON (or without a body), from no Origin or the
// request's own, and, on loopback, for a loopback Host.
func FuzzGuardOrigin(f *testing.F) {
	f.Add(true, "POST", "127.0.0.1:8081", "application/json", "", `{}`)
	f.Add(true, "POST", "127.0.0.1:8081", "", "http://evil.example", `{}`)
	f.Add(true, "POST", "127.0.0.1:8081", "application/json", "http://evil.example", `{}`)
	f.Add(true, "POST", "evil.example:8081", "application/json", "", `{}`)
	f.Add(false, "PUT", "order:8081", "text/plain", "", `{}`)
	f.Add(true, "DELETE", "localhost:8081", "", "http://localhost:8081", ``)
	f.Add(true, "GET", "evil.example", "", "null", ``)
	f.Add(false, "PATCH", "[::1]:80", "application/json; charset=\x00", "http://[::1]:80", `{}`)
	f.Add(true, "POST", "127.0.0.1\x00:8081", "application/json", "http://127.0.0.1\x00:8081", `{}`)
	f.Fuzz(func(t *testing.T, loopback bool, method, host, contentType, origin, body string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n/") || strings.ContainsFunc(method, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			return // not a method a request line can carry
		}
		s := httpapi.New(httpapi.Config{LoopbackHostOnly: loopback}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ran := false
		s.Echo.Any("/things", func(c echo.Context) error {
			ran = true
			return c.JSON(http.StatusOK, map[string]string{"businessCode": httpapi.CodeSuccess})
		})
		req := httptest.NewRequest(http.MethodGet, "/things", strings.NewReader(body))
		req.Method = method
		req.Host = host
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Origin", origin)
		rec := httptest.NewRecorder()
		s.Echo.ServeHTTP(rec, req)
		httpapitest.CheckAnswer(t, rec, false)
		if !ran {
			return
		}
		if loopback {
			name := host
			if h, _, err := net.SplitHostPort(host); err == nil {
				name = h
			}
			name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
			if ip := net.ParseIP(name); !strings.EqualFold(name, "localhost") && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("served Host %q on loopback", host)
			}
		}
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return
		}
		if origin != "" {
			if u, err := url.Parse(origin); err != nil || !strings.EqualFold(u.Host, host) {
				t.Fatalf("served a change from Origin %q to Host %q", origin, host)
			}
		}
		if body != "" {
			if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
				t.Fatalf("served a body of Content-Type %q", contentType)
			}
		}
	})
}
