// Package ports is the reconciliation service's HTTP API: start a run,
// read runs and an order's findings, and check one order's convergence
// now. Every route is an operator's, under /admin.
package ports

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/reconciliationapi"
)

// RequestedByHeader names who starts a run (admin.OperatorHeader,
// required); the run's audit records it.
const RequestedByHeader = admin.OperatorHeader

// Business codes of the reconciliation API besides httpapi's.
const (
	CodeRunNotFound   = "RUN_NOT_FOUND"
	CodeOrderNotFound = "ORDER_NOT_FOUND"
	CodeUnavailable   = "SERVICE_UNAVAILABLE"
	CodeRunInProgress = "RUN_IN_PROGRESS"
)

// Reconciler starts runs and checks.
type Reconciler interface {
	// Start records a run, RUNNING, and does it after returning.
	Start(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error)
	Check(ctx context.Context, orderID string) (app.Check, error)
	Deadline() time.Duration
}

// Audit reads what runs recorded.
type Audit interface {
	Run(ctx context.Context, id int64) (rec.Run, error)
	Runs(ctx context.Context, limit int) ([]rec.Run, []int, error)
	Findings(ctx context.Context, orderID string) ([]rec.Recorded, error)
}

// Handler serves the API.
type Handler struct {
	reconciler Reconciler
	audit      Audit
}

// NewHandler returns the API.
func NewHandler(r Reconciler, a Audit) *Handler {
	return &Handler{reconciler: r, audit: a}
}

// Register adds the routes to the admin group.
func (h *Handler) Register(admin *echo.Group) {
	admin.POST("/reconciliation/runs", h.start)
	admin.GET("/reconciliation/runs", h.list)
	admin.GET("/reconciliation/runs/:id", h.run)
	admin.GET("/reconciliation/findings", h.findings)
	admin.GET("/reconciliation/orders/:id", h.check)
}

func runView(r rec.Run) reconciliationapi.RunView {
	v := reconciliationapi.RunView{ID: r.ID, Status: string(r.Status), StartedBy: r.StartedBy, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		OrderIDs: r.Scope.OrderIDs, MinAge: r.Scope.MinAge.String(), Checked: r.Checked, Actions: r.Actions, Error: r.Error,
		Findings: findingViews(r.Findings), InFlight: r.InFlight, Phase: string(r.Phase),
		OrphanScan: make([]reconciliationapi.OrphanScanView, len(r.OrphanScans))}
	if v.OrderIDs == nil {
		v.OrderIDs = []string{}
	}
	if v.InFlight == nil {
		v.InFlight = []string{}
	}
	for _, p := range r.Phases() {
		v.Phases = append(v.Phases, reconciliationapi.PhaseView{Phase: string(p.Phase), StartedAt: p.StartedAt, FinishedAt: p.FinishedAt})
	}
	for i, sc := range r.OrphanScans {
		v.OrphanScan[i] = reconciliationapi.OrphanScanView(sc)
	}
	return v
}

func findingViews(fs []rec.Recorded) []reconciliationapi.FindingView {
	out := make([]reconciliationapi.FindingView, len(fs))
	for i, f := range fs {
		out[i] = reconciliationapi.FindingView{RunID: f.RunID, OrderID: f.OrderID, Kind: string(f.Kind), Service: f.Service, Expected: f.Expected,
			Actual: f.Actual, Action: string(f.Action), Outcome: f.Outcome, DetectedAt: f.DetectedAt}
	}
	return out
}

func (h *Handler) start(c echo.Context) error {
	var req reconciliationapi.RunRequest
	if err := httpapi.BindOptional(c, &req); err != nil {
		return err
	}
	scope := rec.Scope{OrderIDs: req.OrderIDs, MinAge: h.reconciler.Deadline()}
	if req.MinAge != "" {
		d, err := time.ParseDuration(req.MinAge)
		if err != nil {
			return rules.Invalid("minAge", "must be a duration like \"0s\" or \"30s\", got %q", req.MinAge)
		}
		scope.MinAge = d
	}
	startedBy, err := admin.Operator(c)
	if err != nil {
		return err
	}
	// The run is done by the service, not in this request: the answer is
	// the RUNNING run, which GET /admin/reconciliation/runs/{id} follows.
	run, err := h.reconciler.Start(c.Request().Context(), startedBy, scope)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/admin/reconciliation/runs/"+strconv.FormatInt(run.ID, 10))
	return c.JSON(http.StatusAccepted, runView(run))
}

func (h *Handler) list(c echo.Context) error {
	limit := 20
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return httpapi.BadRequest("limit must be a whole number from 1 to 1000, got %q", s)
		}
		limit = n
	}
	runs, counts, err := h.audit.Runs(c.Request().Context(), limit)
	if err != nil {
		return err
	}
	out := reconciliationapi.RunsView{Runs: make([]reconciliationapi.RunSummary, len(runs))}
	for i, r := range runs {
		out.Runs[i] = reconciliationapi.RunSummary{ID: r.ID, Status: string(r.Status), StartedBy: r.StartedBy, StartedAt: r.StartedAt,
			FinishedAt: r.FinishedAt, Checked: r.Checked, Findings: counts[i], Actions: r.Actions, Error: r.Error, Phase: string(r.Phase)}
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) run(c echo.Context) error {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		return httpapi.BadRequest("run id must be a positive whole number, got %q", c.Param("id"))
	}
	run, err := h.audit.Run(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, runView(run))
}

func (h *Handler) findings(c echo.Context) error {
	orderID := c.QueryParam("orderId")
	if err := rules.ValidateID("orderId", orderID); err != nil {
		return err
	}
	fs, err := h.audit.Findings(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, reconciliationapi.FindingsView{OrderID: orderID, Count: len(fs), Findings: findingViews(fs)})
}

func (h *Handler) check(c echo.Context) error {
	ch, err := h.reconciler.Check(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	out := reconciliationapi.CheckView{OrderID: ch.OrderID, Converged: ch.Converged, Findings: ch.Recorded, Mismatches: []reconciliationapi.MismatchView{}}
	for _, m := range ch.Mismatches {
		out.Mismatches = append(out.Mismatches, reconciliationapi.MismatchView{Kind: string(m.Kind), Service: m.Service, Expected: m.Expected, Actual: m.Actual})
	}
	return c.JSON(http.StatusOK, out)
}

// MapError is the one place the service's errors become HTTP answers.
func MapError(err error) *httpapi.Error {
	switch {
	case errors.Is(err, app.ErrRunNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeRunNotFound, Message: err.Error()}
	case errors.Is(err, app.ErrRunInProgress):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeRunInProgress, Message: err.Error()}
	case errors.Is(err, app.ErrOrderNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeOrderNotFound, Message: err.Error()}
	case errors.Is(err, app.ErrUnavailable):
		return &httpapi.Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeUnavailable,
			Message: "a service reconciliation reads is unavailable, try again", Err: err}
	}
	return nil
}
