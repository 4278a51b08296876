package apispec_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/event"
)

type line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type found struct {
	Note string `json:"note"`
}

type answer struct {
	OrderID string      `json:"orderId"`
	Amount  event.Money `json:"amount"`
	Reason  string      `json:"reason,omitempty"`
	Lines   []line      `json:"lines"`
	*found
}

type request struct {
	Reason string `json:"reason"`
}

var ops = []apispec.Operation{
	{Method: http.MethodGet, Path: "/orders/:id", Summary: "An order.", Answer: answer{}},
	{Method: http.MethodPost, Path: "/admin/orders/:id/cancel", Body: request{}, OptionalBody: true, Answer: answer{}},
	{Method: http.MethodGet, Path: "/admin/orders", Query: []string{"limit"}, Answer: []answer{}},
}

func TestDocument(t *testing.T) {
	doc, err := apispec.Document("test", "a test API", ops)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	if d.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", d.OpenAPI)
	}
	for _, p := range []string{"/orders/{id}", "/admin/orders/{id}/cancel", "/admin/orders"} {
		if d.Paths[p] == nil {
			t.Errorf("path %s missing", p)
		}
	}
	a, ok := d.Components.Schemas["ApispecTestAnswer"]
	if !ok {
		t.Fatalf("no answer schema in %v", d.Components.Schemas)
	}
	if got := strings.Join(a.Required, ","); got != "orderId,amount,lines" {
		t.Errorf("answer requires %s, want orderId,amount,lines", got)
	}
	if got := string(a.Properties["amount"]); !strings.Contains(got, "EventMoney") {
		t.Errorf("amount = %s, want event.Money", got)
	}
	if m := d.Components.Schemas["EventMoney"]; m.Properties != nil {
		t.Errorf("money has properties %v, want a decimal string", m.Properties)
	}
	if !strings.Contains(string(doc), `"pattern": "^-?[0-9]+\\.[0-9]{2}$"`) {
		t.Error("money's pattern missing")
	}
	if _, ok := a.Properties["note"]; !ok {
		t.Errorf("embedded pointer's field missing: %v", a.Properties)
	}
}

func TestCheck(t *testing.T) {
	e := echo.New()
	h := func(echo.Context) error { return nil }
	e.GET("/orders/:id", h)
	g := e.Group("/admin")
	g.Use(func(next echo.HandlerFunc) echo.HandlerFunc { return next })
	g.POST("/orders/:id/cancel", h)
	g.GET("/orders", h)
	if err := apispec.Check(ops, e.Routes()); err != nil {
		t.Fatalf("matching routes: %v", err)
	}
	e.GET("/undocumented", h)
	err := apispec.Check(append(ops, apispec.Operation{Method: http.MethodGet, Path: "/absent"}), e.Routes())
	for _, want := range []string{"GET /undocumented is served but not in", "GET /absent is in the OpenAPI document but not served"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to say %q", err, want)
		}
	}
}
