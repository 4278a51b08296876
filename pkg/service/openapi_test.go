package service_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// TestServesItsOpenAPIDocument: GET /openapi.json is public and describes
// the kit's routes and the service's own.
func TestServesItsOpenAPIDocument(t *testing.T) {
	cfg := testConfig(t)
	cfg.AdminToken = "an-admin-token-for-this-test"
	cfg.FailPointsEnabled = true
	base := startService(t, cfg, service.Options{}, func(svc *service.Service) {
		svc.HTTP.Echo.GET("/things/:id", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
		svc.Describe(apispec.Operation{Method: http.MethodGet, Path: "/things/:id"})
	})
	resp, err := http.Get(base + apispec.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Info    struct{ Title string }     `json:"info"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", apispec.Path, resp.StatusCode, err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Title != cfg.Name {
		t.Errorf("openapi %q, title %q", doc.OpenAPI, doc.Info.Title)
	}
	for _, p := range []string{"/things/{id}", "/healthz", "/openapi.json", "/admin/failpoints/{name}"} {
		if doc.Paths[p] == nil {
			t.Errorf("path %s missing from the document", p)
		}
	}
}

// TestRunRefusesAnUndescribedRoute: a route registered without its
// operation, or an operation without its route, stops the start.
func TestRunRefusesAnUndescribedRoute(t *testing.T) {
	for name, change := range map[string]func(*service.Service){
		"route undescribed": func(svc *service.Service) {
			svc.HTTP.Echo.GET("/hidden", func(echo.Context) error { return nil })
		},
		"operation unserved": func(svc *service.Service) {
			svc.Describe(apispec.Operation{Method: http.MethodGet, Path: "/promised"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			svc, err := service.New(context.Background(), testConfig(t), io.Discard, service.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			change(svc)
			err = svc.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "OpenAPI document") {
				t.Fatalf("Run = %v, want a refusal naming the OpenAPI document", err)
			}
		})
	}
}
