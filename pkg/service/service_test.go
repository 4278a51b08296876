package service_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestDebugRoutesOnlyWhenEnabled starts a service with and without
// FAILPOINTS_ENABLED and PPROF_ENABLED: the fail point and profile routes
// exist only when enabled, and answer 404 otherwise.
func TestDebugRoutesOnlyWhenEnabled(t *testing.T) {
	tests := []struct {
		name    string
		enabled bool
		want    int
	}{
		{"disabled", false, http.StatusNotFound},
		{"enabled", true, http.StatusOK},
	}
	server := postgrestest.ServerURL(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := postgrestest.UniqueName("t_service")
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := postgres.DropDatabase(ctx, server, db); err != nil {
					t.Errorf("drop database: %v", err)
				}
			})
			cfg := service.Config{Name: "audit-service", DatabaseURL: server, DBName: db, HTTPAddr: servicetest.FreeAddr(t),
				LogLevel: "error", Mode: service.ModeDevelopment, FailPointsEnabled: tt.enabled, ProfilingEnabled: tt.enabled,
				DB: postgres.DefaultTimeouts()}
			ctx, cancel := context.WithCancel(context.Background())
			svc, err := service.New(ctx, cfg, io.Discard, service.Options{})
			if err != nil {
				cancel()
				t.Fatal(err)
			}
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
			call := func(method, path, body string) int {
				req, err := http.NewRequest(method, base+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			poll.Until(t, 30*time.Second, "the service to be ready", func() bool { return call("GET", "/readyz", "") == http.StatusOK })
			if got := call("PUT", "/admin/failpoints/relay.after-publish", `{"action":"error"}`); got != tt.want {
				t.Errorf("PUT /admin/failpoints = %d, want %d", got, tt.want)
			}
			if got := call("GET", "/admin/debug/pprof/", ""); got != tt.want {
				t.Errorf("GET /admin/debug/pprof/ = %d, want %d", got, tt.want)
			}
		})
	}
}
