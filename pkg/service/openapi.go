package service

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
)

// Describe adds the service's own routes to its OpenAPI document
// (apispec): every route the service registers besides the kit's, which
// the kit describes itself. Run refuses to start while a registered route
// is undescribed or a described one is not registered.
func (s *Service) Describe(ops ...apispec.Operation) {
	s.ops = append(s.ops, ops...)
}

// serveDocument registers GET /openapi.json, public and never shed: a
// client reads the contract whatever the load.
func (s *Service) serveDocument() {
	s.HTTP.Echo.GET(apispec.Path, func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, s.document)
	})
	s.HTTP.Exempt(http.MethodGet, apispec.Path)
}

// buildDocument checks the described operations against the routes
// registered and generates the document GET /openapi.json serves.
func (s *Service) buildDocument() error {
	if err := apispec.Check(s.ops, s.HTTP.Echo.Routes()); err != nil {
		return fmt.Errorf("OpenAPI document of %s: %w", s.Config.Name, err)
	}
	doc, err := apispec.Document(s.Config.Name, "The HTTP API of "+s.Config.Name+" (README.md, API).", s.ops)
	if err != nil {
		return fmt.Errorf("OpenAPI document of %s: %w", s.Config.Name, err)
	}
	s.document = doc
	return nil
}
