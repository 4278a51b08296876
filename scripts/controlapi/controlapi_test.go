package controlapi_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
)

func TestRequests(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name         string
		call         func(c *controlapi.Client) (string, error)
		answer       string
		method, path string
		body         string
		want         string
	}{
		{"services", func(c *controlapi.Client) (string, error) {
			v, err := c.Services(ctx)
			if len(v) != 1 {
				return "", err
			}
			return v[0].Name + " " + v[0].State, err
		}, `{"services":[{"name":"points","state":"stopped","run":2}]}`, "GET", "/services", "", "points stopped"},
		{"restart", func(c *controlapi.Client) (string, error) {
			v, err := c.Restart(ctx, "points", map[string]string{"LOG_LEVEL": "debug"})
			return v.State, err
		}, `{"name":"points","state":"running","run":3}`, "POST", "/services/points/restart", `{"env":{"LOG_LEVEL":"debug"}}`, "running"},
		{"stop", func(c *controlapi.Client) (string, error) {
			v, err := c.Stop(ctx, "points")
			return v.State, err
		}, `{"name":"points","state":"stopped"}`, "POST", "/services/points/stop", "", "stopped"},
		{"scale", func(c *controlapi.Client) (string, error) {
			v, err := c.Scale(ctx, "inventory", 2)
			if len(v.Instances) != 2 {
				return "", err
			}
			return v.Instances[1].Name, err
		}, `{"service":"inventory","instances":[{"name":"inventory"},{"name":"inventory#2","instance":2}]}`, "POST", "/services/inventory/scale", `{"instances":2}`, "inventory#2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var method, path, body, ctype string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				method, path, body, ctype = r.Method, r.URL.Path, string(raw), r.Header.Get("Content-Type")
				_, _ = io.WriteString(w, tt.answer)
			}))
			defer srv.Close()
			got, err := tt.call(controlapi.New(srv.URL, 5*time.Second))
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if method != tt.method || path != tt.path || strings.TrimSpace(body) != tt.body {
				t.Errorf("sent %s %s %s, want %s %s %s", method, path, body, tt.method, tt.path, tt.body)
			}
			if method == "POST" && ctype != "application/json" {
				t.Errorf("a change without Content-Type: application/json (%q): the runner refuses it", ctype)
			}
		})
	}
}

func TestRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"no such service"}`)
	}))
	defer srv.Close()
	_, err := controlapi.New(srv.URL, 5*time.Second).Stop(context.Background(), "nope")
	var se *controlapi.StatusError
	if !errors.As(err, &se) || se.Status != 404 || se.Message != "no such service" {
		t.Fatalf("err %v, want a 404 StatusError saying no such service", err)
	}
}
