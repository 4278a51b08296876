package controlapi_test

import (
	"context"
	"errors"
	"fmt"
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
		{"exit", func(c *controlapi.Client) (string, error) {
			v, err := c.Exit(ctx, "order", 90*time.Second)
			if v.ExitCode == nil {
				return "", err
			}
			return fmt.Sprint(v.State, " ", *v.ExitCode), err
		}, `{"name":"order","state":"exited","exitCode":137,"failPoint":true}`, "GET", "/services/order/exit?timeout=1m30s", "", "exited 137"},
		{"broker", func(c *controlapi.Client) (string, error) {
			v, err := c.Broker(ctx)
			if v.Fault == nil {
				return "", err
			}
			return fmt.Sprint(v.State, " ", v.Fault.Type, " ", v.Fault.Hits), err
		}, `{"embedded":true,"state":"running","fault":{"type":"lost-ack","count":4,"topic":"t","hits":2}}`, "GET", "/broker", "", "running lost-ack 2"},
		{"stop broker", func(c *controlapi.Client) (string, error) {
			v, err := c.StopBroker(ctx)
			return v.State, err
		}, `{"embedded":true,"state":"stopped","stops":1}`, "POST", "/broker/stop", "", "stopped"},
		{"start broker", func(c *controlapi.Client) (string, error) {
			v, err := c.StartBroker(ctx)
			return v.State, err
		}, `{"embedded":true,"state":"running","stops":1}`, "POST", "/broker/start", "", "running"},
		{"arm fault", func(c *controlapi.Client) (string, error) {
			v, err := c.ArmFault(ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Count: 4, Topic: "t"})
			if v.Fault == nil {
				return "", err
			}
			return v.Fault.Topic, err
		}, `{"embedded":true,"state":"running","fault":{"type":"lost-ack","count":4,"topic":"t","hits":0}}`, "POST", "/broker/faults", `{"type":"lost-ack","count":4,"topic":"t"}`, "t"},
		{"clear fault", func(c *controlapi.Client) (string, error) {
			v, err := c.ClearFault(ctx)
			return fmt.Sprint(v.Fault == nil), err
		}, `{"embedded":true,"state":"running"}`, "DELETE", "/broker/faults", "", "true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var method, path, body, ctype string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				raw, _ := io.ReadAll(r.Body)
				method, path, body, ctype = r.Method, r.URL.RequestURI(), string(raw), r.Header.Get("Content-Type")
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
