package service_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestEveryServiceTakesIdempotencyKeys starts a service with an admin
// token: a keyed command runs once and is replayed on its public routes
// and in its admin group alike, and an admin command without the token is
// refused before its key is looked at, so it neither runs, nor consumes
// the key, nor reads the key's answer.
func TestEveryServiceTakesIdempotencyKeys(t *testing.T) {
	server := postgrestest.ServerURL(t)
	db := postgrestest.UniqueName("t_service")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, db); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	const token = "an-admin-token-for-this-test"
	cfg := service.Config{Name: "audit-service", DatabaseURL: server, DBName: db, HTTPAddr: servicetest.FreeAddr(t),
		LogLevel: "error", Mode: service.ModeDevelopment, DB: postgres.DefaultTimeouts(), AdminToken: token}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, io.Discard, service.Options{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var publicRuns, adminRuns atomic.Int64
	svc.HTTP.Echo.POST("/things", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]int64{"run": publicRuns.Add(1)})
	})
	svc.Admin.POST("/things", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]int64{"run": adminRuns.Add(1)})
	})
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		_ = svc.Close()
	})
	base := "http://" + cfg.HTTPAddr
	type answer struct {
		status   int
		body     string
		replayed string
	}
	call := func(path, key, auth string) answer {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idempotency.Header, key)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, string(body), resp.Header.Get(idempotency.ReplayedHeader)}
	}
	poll.Until(t, 30*time.Second, "the service to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

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
