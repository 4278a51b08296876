package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// syncBuffer is a bytes.Buffer the proxy's goroutines and the test share.
type syncBuffer = servicetest.LogBuffer

// run serves the admin API until its context ends, and refuses settings it
// cannot use.
func TestRun(t *testing.T) {
	env := map[string]string{"FAULTPROXY_LISTEN": "127.0.0.1:0", "FAULTPROXY_UPSTREAM": "127.0.0.1:1", "FAULTPROXY_ADMIN_ADDR": "127.0.0.1:0"}
	getenv := func(k string) string { return env[k] }
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, getenv, &out) }()
	var admin string
	poll.Until(t, 10*time.Second, "the admin API's address logged", func() bool {
		_, after, ok := strings.Cut(out.String(), "admin API on ")
		admin = strings.TrimSpace(after)
		return ok
	})
	resp, err := http.Get("http://" + admin + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel = %v", err)
	}

	for name, bad := range map[string]map[string]string{
		"upstream without port": {"FAULTPROXY_UPSTREAM": "redpanda"},
		"admin without port":    {"FAULTPROXY_ADMIN_ADDR": "admin"},
		"bad timeout":           {"FAULTPROXY_DIAL_TIMEOUT": "soon"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(context.Background(), func(k string) string { return bad[k] }, &syncBuffer{}); err == nil {
				t.Error("run accepted it")
			}
		})
	}
}
