package service_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// TestEveryServiceTakesIdempotencyKeys starts a service with an admin
// token: a keyed command runs once and is replayed on its public routes
// and in its admin group alike, and an admin command without the token is
// refused before its key is looked at, so it neither runs, nor consumes
// the key, nor reads the key's answer.
func TestEveryServiceTakesIdempotencyKeys(t *testing.T) {
	const token = "an-admin-token-for-this-test"
	cfg := testConfig(t)
	cfg.AdminToken = token
	var publicRuns, adminRuns atomic.Int64
	base := startService(t, cfg, service.Options{}, func(svc *service.Service) {
		svc.HTTP.Echo.POST("/things", func(c echo.Context) error {
			return c.JSON(http.StatusOK, map[string]int64{"run": publicRuns.Add(1)})
		})
		svc.Admin.POST("/things", func(c echo.Context) error {
			return c.JSON(http.StatusOK, map[string]int64{"run": adminRuns.Add(1)})
		})
		svc.Describe(apispec.Operation{Method: http.MethodPost, Path: "/things"},
			apispec.Operation{Method: http.MethodPost, Path: "/admin/things"})
	})
	type answer struct {
		status   int
		body     string
		replayed string
	}
	call := func(path, key, auth string) answer {
		header := http.Header{}
		header.Set(idempotency.Header, key)
		if auth != "" {
			header.Set("Authorization", "Bearer "+auth)
		}
		status, answered, body := send(t, http.MethodPost, base+path, `{"n":1}`, header)
		return answer{status, body, answered.Get(idempotency.ReplayedHeader)}
	}

	steps := []struct {
		name, path, key, auth string
		status                int
		replayed              bool
		publicRuns, adminRuns int64
	}{
		{"public, first", "/things", "k-1", "", http.StatusOK, false, 1, 0},
		{"public, again", "/things", "k-1", "", http.StatusOK, true, 1, 0},
		{"admin without the token", "/admin/things", "k-2", "", http.StatusUnauthorized, false, 1, 0},
		{"admin with a wrong token", "/admin/things", "k-2", "wrong", http.StatusUnauthorized, false, 1, 0},
		{"admin, first", "/admin/things", "k-2", token, http.StatusOK, false, 1, 1},
		{"admin, again", "/admin/things", "k-2", token, http.StatusOK, true, 1, 1},
		{"admin without the token after the answer", "/admin/things", "k-2", "", http.StatusUnauthorized, false, 1, 1},
		{"malformed key", "/things", strings.Repeat("k", 300), "", http.StatusBadRequest, false, 1, 1},
	}
	for _, s := range steps {
		got := call(s.path, s.key, s.auth)
		if got.status != s.status || (got.replayed == "true") != s.replayed {
			t.Fatalf("%s: %d %q %s, want %d replayed %v", s.name, got.status, got.replayed, got.body, s.status, s.replayed)
		}
		if publicRuns.Load() != s.publicRuns || adminRuns.Load() != s.adminRuns {
			t.Fatalf("%s: runs public %d admin %d, want %d %d", s.name, publicRuns.Load(), adminRuns.Load(), s.publicRuns, s.adminRuns)
		}
	}
}
