package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
)

var errDomainMissing = errors.New("missing")

func newServer(token string) *httpapi.Server {
	s := httpapi.New(httpapi.Config{Profiling: true,
		AdminToken: token,
		Registry:   observability.NewRegistry(),
		Ready:      func(context.Context) error { return nil },
		MapError: func(err error) *httpapi.Error {
			if errors.Is(err, errDomainMissing) {
				return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: "THING_NOT_FOUND", Message: "no such thing"}
			}
			return nil
		},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Echo.POST("/things", func(c echo.Context) error {
		var body struct {
			Name string `json:"name"`
		}
		if err := httpapi.Bind(c, &body); err != nil {
			return err
		}
		if body.Name == "" {
			return httpapi.BadRequest("name is required")
		}
		return c.JSON(http.StatusOK, map[string]string{"businessCode": httpapi.CodeSuccess})
	})
	s.Echo.GET("/things/:id", func(echo.Context) error { return errDomainMissing })
	s.Echo.GET("/boom", func(echo.Context) error { return errors.New("database exploded") })
	s.Admin().GET("/secret", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"ok": "yes"}) })
	return s
}

func TestErrorsBecomeJSONAnswers(t *testing.T) {
	s := newServer("tok")
	tests := []struct {
		name, method, path, body, auth string
		status                         int
		code                           string
	}{
		{"ok", "POST", "/things", `{"name":"x"}`, "", 200, "SUCCESS"},
		{"malformed JSON", "POST", "/things", `{"name":`, "", 400, httpapi.CodeInvalidRequest},
		{"missing field", "POST", "/things", `{}`, "", 400, httpapi.CodeInvalidRequest},
		{"wrong type", "POST", "/things", `{"name":1}`, "", 400, httpapi.CodeInvalidRequest},
		{"unknown field", "POST", "/things", `{"name":"x","nmae":"y"}`, "", 400, httpapi.CodeInvalidRequest}, //nolint:misspell // the misspelt field is the unknown field under test
		{"trailing object", "POST", "/things", `{"name":"x"}{"name":"y"}`, "", 400, httpapi.CodeInvalidRequest},
		{"trailing bytes", "POST", "/things", `{"name":"x"} junk`, "", 400, httpapi.CodeInvalidRequest},
		{"trailing whitespace is fine", "POST", "/things", "{\"name\":\"x\"}\n\t ", "", 200, "SUCCESS"},
		{"empty body", "POST", "/things", ``, "", 400, httpapi.CodeInvalidRequest},
		{"profile longer than the cap", "GET", "/admin/debug/pprof/profile?seconds=3600", "", "Bearer tok", 400, httpapi.CodeInvalidRequest},
		{"profile of no time", "GET", "/admin/debug/pprof/trace?seconds=0", "", "Bearer tok", 400, httpapi.CodeInvalidRequest},
		{"oversize", "POST", "/things", `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, "", 413, httpapi.CodeTooLarge},
		{"domain error mapped once", "GET", "/things/1", "", "", 404, "THING_NOT_FOUND"},
		{"id in the path breaking the id rule", "GET", "/things/a%20b", "", "", 400, httpapi.CodeInvalidRequest},
		{"id in the path too long", "GET", "/things/" + strings.Repeat("x", 129), "", "", 400, httpapi.CodeInvalidRequest},
		{"id in the query breaking the id rule", "GET", "/things/1?orderId=" + strings.Repeat("O", 1000), "", "", 400, httpapi.CodeInvalidRequest},
		{"empty id filter", "GET", "/things/1?orderId=", "", "", 404, "THING_NOT_FOUND"},
		{"unknown route", "GET", "/nope", "", "", 404, httpapi.CodeNotFound},
		{"internal error hides its cause", "GET", "/boom", "", "", 500, httpapi.CodeInternal},
		{"admin without token", "GET", "/admin/secret", "", "", 401, httpapi.CodeUnauthorized},
		{"admin with wrong token", "GET", "/admin/secret", "", "Bearer nope", 401, httpapi.CodeUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			s.Echo.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.status, rec.Body)
			}
			var body map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("answer is not JSON: %s", rec.Body)
			}
			if body["businessCode"] != tt.code {
				t.Errorf("businessCode %q, want %q", body["businessCode"], tt.code)
			}
			if tt.status >= 400 && body["message"] == "" {
				t.Error("error answer without a message")
			}
			if strings.Contains(rec.Body.String(), "exploded") {
				t.Error("internal error leaked its cause")
			}
		})
	}
}

func TestAdminWithTokenAndHealth(t *testing.T) {
	s := newServer("tok")
	for path, auth := range map[string]string{"/admin/secret": "Bearer tok", "/healthz": "", "/readyz": "", "/metrics": ""} {
		req := httptest.NewRequest("GET", path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		s.Echo.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("%s: %d", path, rec.Code)
		}
	}
	open := newServer("")
	rec := httptest.NewRecorder()
	open.Echo.ServeHTTP(rec, httptest.NewRequest("GET", "/admin/secret", nil))
	if rec.Code != 200 {
		t.Errorf("admin without a configured token: %d, want open", rec.Code)
	}
}

// TestProfilingOnlyWhenEnabled checks that /admin/debug/pprof/ is served,
// behind the admin token, only when Profiling is set.
func TestProfilingOnlyWhenEnabled(t *testing.T) {
	tests := []struct {
		name      string
		profiling bool
		auth      string
		want      int
	}{
		{"disabled", false, "Bearer tok", http.StatusNotFound},
		{"enabled", true, "Bearer tok", http.StatusOK},
		{"enabled without the token", true, "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := httpapi.New(httpapi.Config{AdminToken: "tok", Profiling: tt.profiling}, slog.New(slog.DiscardHandler))
			for _, path := range []string{"/admin/debug/pprof/", "/admin/debug/pprof/goroutine", "/admin/debug/pprof/cmdline"} {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				rec := httptest.NewRecorder()
				s.Echo.ServeHTTP(rec, req)
				if rec.Code != tt.want {
					t.Errorf("GET %s = %d, want %d", path, rec.Code, tt.want)
				}
			}
		})
	}
}

// A client sending its body a byte at a time is cut off by the read
// timeout instead of holding its connection for as long as it likes.
func TestSlowBodyIsCutOffByTheReadTimeout(t *testing.T) {
	s := httpapi.New(httpapi.Config{Timeouts: httpapi.Timeouts{Read: 300 * time.Millisecond}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.Echo.POST("/things", func(c echo.Context) error {
		var body map[string]any
		if err := httpapi.Bind(c, &body); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, body)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const bodyLen = 1000
	if _, err := fmt.Fprintf(conn, "POST /things HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", bodyLen); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes the connection
	}()
	start := time.Now()
	// A byte every 20ms: 1000 bytes would take 20s.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < bodyLen; sent++ {
		select {
		case <-closed:
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("cut off after %v, want about the 300ms read timeout", took)
			}
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return // the server closed the connection
			}
		}
	}
	t.Fatalf("the server read a %d-byte body sent over %v", bodyLen, time.Since(start))
}
