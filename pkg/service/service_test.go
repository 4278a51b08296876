package service_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.FailPointsEnabled, cfg.ProfilingEnabled = tt.enabled, tt.enabled
			cfg.FailPointNames = outbox.FailPoints()
			base := startService(t, cfg, service.Options{}, func(*service.Service) {})
			call := func(method, path, body string) int {
				status, _, _ := send(t, method, base+path, body, nil)
				return status
			}
			if got := call("PUT", "/admin/failpoints/relay.after-publish", `{"action":"error"}`); got != tt.want {
				t.Errorf("PUT /admin/failpoints = %d, want %d", got, tt.want)
			}
			if got := call("GET", "/admin/failpoints", ""); got != tt.want {
				t.Errorf("GET /admin/failpoints = %d, want %d", got, tt.want)
			}
			if got := call("GET", "/admin/debug/pprof/", ""); got != tt.want {
				t.Errorf("GET /admin/debug/pprof/ = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestAddRelayWantsItsFailPointsDeclared: a service that adds a relay
// without declaring the relay's fail points could never arm them, so
// AddRelay refuses, naming what to declare.
func TestAddRelayWantsItsFailPointsDeclared(t *testing.T) {
	cfg := testConfig(t)
	cfg.FailPointNames = []string{"audit.apply"}
	svc, err := service.New(context.Background(), cfg, io.Discard, service.Options{Migrations: []postgres.MigrationSet{outbox.Schema()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	_, err = svc.AddRelay(outbox.RelayConfig{}, nil)
	if err == nil || !strings.Contains(err.Error(), "fail point relay.before-publish is not declared") ||
		!strings.Contains(err.Error(), "outbox.FailPoints()") {
		t.Fatalf("AddRelay = %v, want a refusal naming the undeclared relay fail point", err)
	}
}

// TestAdmissionDefaultsToTwiceThePool starts a service with a pool of one
// connection and no HTTP_MAX_IN_FLIGHT: two business requests, each having
// used the database, are admitted and a third is shed at once with 503
// OVERLOADED and Retry-After, while readiness (which pings the database)
// still answers.
func TestAdmissionDefaultsToTwiceThePool(t *testing.T) {
	cfg := testConfig(t)
	cfg.Admission = httpapi.Admission{QueueWait: httpapi.DefaultQueueWait}
	entered, release := make(chan struct{}, 2), make(chan struct{})
	base := startService(t, cfg, service.Options{Pool: postgres.PoolConfig{MaxOpen: 1}}, func(svc *service.Service) {
		svc.Describe(apispec.Operation{Method: http.MethodGet, Path: "/work"})
		svc.HTTP.Echo.GET("/work", func(c echo.Context) error {
			if err := svc.DB.PingContext(c.Request().Context()); err != nil {
				return err
			}
			entered <- struct{}{}
			<-release
			return c.NoContent(http.StatusOK)
		})
	})

	answered := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(base + "/work")
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
	}
	<-entered
	<-entered
	for path, want := range map[string]int{"/work": http.StatusServiceUnavailable, "/readyz": http.StatusOK} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s with both slots taken = %d, want %d", path, resp.StatusCode, want)
		}
		if want == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", path)
		}
	}
	close(release)
	for range 2 {
		if code := <-answered; code != http.StatusOK {
			t.Errorf("an admitted request answered %d", code)
		}
	}
}
