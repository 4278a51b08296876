package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/observability"
)

var errDomainMissing = errors.New("missing")

func newServer(token string) *httpapi.Server {
	s := httpapi.New(httpapi.Config{
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
		{"oversize", "POST", "/things", `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, "", 413, httpapi.CodeTooLarge},
		{"domain error mapped once", "GET", "/things/1", "", "", 404, "THING_NOT_FOUND"},
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
