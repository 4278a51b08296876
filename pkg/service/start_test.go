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

// testConfig is the configuration of a service a test starts: development
// mode on a free loopback address, with a database of its own, dropped
// when the test ends.
func testConfig(t *testing.T) service.Config {
	t.Helper()
	server := postgrestest.ServerURL(t)
	db := postgrestest.UniqueName("t_service")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, db); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return service.Config{Name: "audit-service", DatabaseURL: server, DBName: db, HTTPAddr: servicetest.FreeAddr(t),
		LogLevel: "error", Mode: service.ModeDevelopment, DB: postgres.DefaultTimeouts()}
}

// startService opens a service with cfg and opts, lets routes add its
// routes, runs it until the test ends and waits until it is ready. It
// returns the service's base URL.
func startService(t *testing.T, cfg service.Config, opts service.Options, routes func(*service.Service)) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := service.New(ctx, cfg, io.Discard, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	routes(svc)
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
	poll.Until(t, 30*time.Second, "the service to be ready", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// send sends body as JSON with header and returns the answer's status,
// headers and body; a service that cannot be reached answers 0.
func send(t *testing.T, method, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(raw)
}
