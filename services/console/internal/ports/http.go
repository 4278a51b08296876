// Package ports serves the console: server-rendered pages with a little
// plain JavaScript, their assets embedded in the binary (it works offline),
// and the same data as JSON under /api.
package ports

import (
	"context"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Timelines builds an order's timeline.
type Timelines interface {
	Build(ctx context.Context, orderID string) (app.Timeline, error)
}

// Config is how the console's pages are served.
type Config struct {
	// AdminToken, when set, is asked of every request but the probes': as
	// a bearer token, or as the password of HTTP basic authentication,
	// which a browser asks its user for (any user name, which names the
	// operator in audits).
	AdminToken string
	// Development shows the console is in development mode.
	Development bool
}

// Deps are what the pages read and do.
type Deps struct {
	Timelines   Timelines
	DeadLetters DeadLetters
	Monitor     Monitor
	Drills      Drills
	Switches    Switches
}

// Handler serves the console.
type Handler struct {
	cfg       Config
	pages     map[string]*template.Template
	timelines Timelines
	dlq       DeadLetters
	monitor   Monitor
	drills    Drills
	switches  Switches
}

// pages are the templates, each rendered inside layout.html.
var pages = []string{"home.html", "order.html", "error.html", "dlq.html", "consumers.html", "drills.html", "switches.html"}

// Register adds the console's routes to e.
func Register(e *echo.Echo, cfg Config, deps Deps) (*Handler, error) {
	h := &Handler{cfg: cfg, pages: map[string]*template.Template{}, timelines: deps.Timelines, dlq: deps.DeadLetters,
		monitor: deps.Monitor, drills: deps.Drills, switches: deps.Switches}
	for _, p := range pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", p, err)
		}
		h.pages[p] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	e.Use(h.authenticate)
	e.StaticFS("/static", static)
	e.GET("/", h.home)
	e.GET("/orders", h.findOrder)
	e.GET("/orders/:id", h.orderPage)
	e.GET("/api/orders/:id/timeline", h.timelineJSON)
	e.GET("/dlq", h.dlqPage)
	e.POST("/api/dlq/:service/:id/replay", h.replay)
	e.GET("/consumers", h.consumersPage)
	e.GET("/api/consumers", h.consumersJSON)
	e.GET("/drills", h.drillsPage)
	e.GET("/api/drills/runs", h.drillRuns)
	e.POST("/api/drills/runs", h.startDrill)
	e.GET("/api/drills/runs/:id", h.drillRun)
	e.GET("/switches", h.switchesPage)
	e.POST("/api/failpoints/:service/:name", h.armFailPoint)
	e.POST("/api/services/:name/:verb", h.flipProcess)
	return h, nil
}

// open are the routes every caller may read: the probes and metrics.
var open = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// authenticate asks every request but the probes' for the admin token,
// when one is set.
func (h *Handler) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	if h.cfg.AdminToken == "" {
		return next
	}
	want := []byte(h.cfg.AdminToken)
	return func(c echo.Context) error {
		if open[c.Request().URL.Path] {
			return next(c)
		}
		if got, ok := token(c.Request()); ok && subtle.ConstantTimeCompare([]byte(got), want) == 1 {
			return next(c)
		}
		c.Response().Header().Set("WWW-Authenticate", `Basic realm="console", charset="UTF-8"`)
		return &httpapi.Error{Status: http.StatusUnauthorized, BusinessCode: httpapi.CodeUnauthorized,
			Message: "admin token required: as a bearer token, or as the password of basic authentication"}
	}
}

// token is the credential of r: a bearer token, or a basic password.
func token(r *http.Request) (string, bool) {
	auth := r.Header.Get(echo.HeaderAuthorization)
	if t, ok := strings.CutPrefix(auth, "Bearer "); ok {
		return t, true
	}
	if _, pass, ok := r.BasicAuth(); ok {
		return pass, true
	}
	return "", false
}

// Operator is who a request is from, for the audit of what it asks: the
// user name of basic authentication, or the form's operator field, or
// "console".
func Operator(r *http.Request, given string) string {
	if user, _, ok := r.BasicAuth(); ok && user != "" {
		return user
	}
	if given = strings.TrimSpace(given); given != "" {
		return given
	}
	return "console"
}

// page is what every page's template gets.
type page struct {
	Title       string
	Nav         string
	Development bool
	Data        any
}

func (h *Handler) render(c echo.Context, status int, name, nav, title string, data any) error {
	var b strings.Builder
	if err := h.pages[name].ExecuteTemplate(&b, "layout", page{Title: title, Nav: nav, Development: h.cfg.Development, Data: data}); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	return c.HTML(status, b.String())
}

// renderFragment renders one template of a page alone, for the page's
// script to swap in.
func (h *Handler) renderFragment(c echo.Context, name, fragment string, data any) error {
	var b strings.Builder
	if err := h.pages[name].ExecuteTemplate(&b, fragment, page{Development: h.cfg.Development, Data: data}); err != nil {
		return fmt.Errorf("render %s %s: %w", name, fragment, err)
	}
	return c.HTML(http.StatusOK, b.String())
}

func (h *Handler) home(c echo.Context) error {
	return h.render(c, http.StatusOK, "home.html", "orders", "Console", nil)
}

// findOrder sends the home page's search to the order's page.
func (h *Handler) findOrder(c echo.Context) error {
	id := strings.TrimSpace(c.QueryParam("orderId"))
	if id == "" {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return c.Redirect(http.StatusSeeOther, "/orders/"+url.PathEscape(id))
}

func (h *Handler) orderPage(c echo.Context) error {
	id := c.Param("id")
	tl, err := h.timelines.Build(c.Request().Context(), id)
	if errors.Is(err, app.ErrOrderNotFound) {
		return h.render(c, http.StatusNotFound, "error.html", "orders", "Order "+id, "The order service does not know order "+id+".")
	}
	if err != nil {
		return err
	}
	if c.QueryParam("fragment") == "1" {
		return h.renderFragment(c, "order.html", "order-body", newOrderView(tl))
	}
	return h.render(c, http.StatusOK, "order.html", "orders", "Order "+id, newOrderView(tl))
}

func (h *Handler) timelineJSON(c echo.Context) error {
	tl, err := h.timelines.Build(c.Request().Context(), c.Param("id"))
	if errors.Is(err, app.ErrOrderNotFound) {
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeOrderNotFound, Message: err.Error()}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tl)
}

// CodeOrderNotFound answers an order the order service does not know.
const CodeOrderNotFound = "ORDER_NOT_FOUND"
