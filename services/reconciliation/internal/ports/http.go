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
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
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

// RunRequest is the optional body of POST /admin/reconciliation/runs.
type RunRequest struct {
	OrderIDs []string `json:"orderIds"`
	// MinAge is a Go duration ("0s", "30s"); empty: the convergence
	// deadline.
	MinAge string `json:"minAge"`
}

// FindingView is a finding as the API shows it.
type FindingView struct {
	RunID      int64     `json:"runId"`
	OrderID    string    `json:"orderId"`
	Kind       string    `json:"kind"`
	Service    string    `json:"service"`
	Expected   string    `json:"expected"`
	Actual     string    `json:"actual"`
	Action     string    `json:"action"`
	Outcome    string    `json:"outcome"`
	DetectedAt time.Time `json:"detectedAt"`
}

// RunView answers a run: while it is RUNNING, Phase, Checked, Actions,
// Findings and OrphanScan are how far it has got.
type RunView struct {
	ID         int64         `json:"id"`
	Status     string        `json:"status"`
	StartedBy  string        `json:"startedBy"`
	StartedAt  time.Time     `json:"startedAt"`
	FinishedAt *time.Time    `json:"finishedAt"`
	OrderIDs   []string      `json:"orderIds"`
	MinAge     string        `json:"minAge"`
	Checked    int           `json:"checked"`
	Actions    int           `json:"actions"`
	Error      string        `json:"error,omitempty"`
	Findings   []FindingView `json:"findings"`
	// InFlight are the orders asked for by id that were not compared:
	// their last change is younger than minAge.
	InFlight []string `json:"inFlight"`
	// Phase is the part of the run going on (or the last it reached):
	// COMPARING, then, for a run over every order, ORPHANS.
	Phase string `json:"phase"`
	// Phases are when each phase the run reached began and ended
	// (finishedAt null while it goes on).
	Phases []PhaseView `json:"phases"`
	// OrphanScan is how far the orphan pass has read each consumer's
	// orders; empty before it.
	OrphanScan []OrphanScanView `json:"orphanScan"`
}

// PhaseView is when a phase of a run began and ended.
type PhaseView struct {
	Phase      string     `json:"phase"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// OrphanScanView is how far the orphan pass has read one consumer's list
// of the orders it holds effects for: pages and order ids read (each
// looked up at the order service), orphans named, and whether the list
// was read to its end (or the run named as many orphans as it may).
type OrphanScanView struct {
	Service string `json:"service"`
	Pages   int    `json:"pages"`
	Orders  int    `json:"orders"`
	Orphans int    `json:"orphans"`
	Done    bool   `json:"done"`
}

func runView(r rec.Run) RunView {
	v := RunView{ID: r.ID, Status: string(r.Status), StartedBy: r.StartedBy, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
		OrderIDs: r.Scope.OrderIDs, MinAge: r.Scope.MinAge.String(), Checked: r.Checked, Actions: r.Actions, Error: r.Error,
		Findings: findingViews(r.Findings), InFlight: r.InFlight, Phase: string(r.Phase),
		OrphanScan: make([]OrphanScanView, len(r.OrphanScans))}
	if v.OrderIDs == nil {
		v.OrderIDs = []string{}
	}
	if v.InFlight == nil {
		v.InFlight = []string{}
	}
	for _, p := range r.Phases() {
		v.Phases = append(v.Phases, PhaseView{Phase: string(p.Phase), StartedAt: p.StartedAt, FinishedAt: p.FinishedAt})
	}
	for i, sc := range r.OrphanScans {
		v.OrphanScan[i] = OrphanScanView(sc)
	}
	return v
}

func findingViews(fs []rec.Recorded) []FindingView {
	out := make([]FindingView, len(fs))
	for i, f := range fs {
		out[i] = FindingView{RunID: f.RunID, OrderID: f.OrderID, Kind: string(f.Kind), Service: f.Service, Expected: f.Expected,
			Actual: f.Actual, Action: string(f.Action), Outcome: f.Outcome, DetectedAt: f.DetectedAt}
	}
	return out
}

func (h *Handler) start(c echo.Context) error {
	var req RunRequest
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

// RunsView answers GET /admin/reconciliation/runs.
type RunsView struct {
	Runs []RunSummary `json:"runs"`
}

// RunSummary is a run without its findings.
type RunSummary struct {
	ID         int64      `json:"id"`
	Status     string     `json:"status"`
	StartedBy  string     `json:"startedBy"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	Checked    int        `json:"checked"`
	Findings   int        `json:"findings"`
	Actions    int        `json:"actions"`
	Error      string     `json:"error,omitempty"`
	// Phase is the part of the run going on, or the last it reached.
	Phase string `json:"phase"`
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
	out := RunsView{Runs: make([]RunSummary, len(runs))}
	for i, r := range runs {
		out.Runs[i] = RunSummary{ID: r.ID, Status: string(r.Status), StartedBy: r.StartedBy, StartedAt: r.StartedAt,
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

// FindingsView answers GET /admin/reconciliation/findings?orderId=.
type FindingsView struct {
	OrderID  string        `json:"orderId"`
	Count    int           `json:"count"`
	Findings []FindingView `json:"findings"`
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
	return c.JSON(http.StatusOK, FindingsView{OrderID: orderID, Count: len(fs), Findings: findingViews(fs)})
}

// CheckView answers GET /admin/reconciliation/orders/{id}: whether every
// service has caught up with the order now, what has not, and how many
// findings runs recorded for it.
type CheckView struct {
	OrderID    string         `json:"orderId"`
	Converged  bool           `json:"converged"`
	Findings   int            `json:"findings"`
	Mismatches []MismatchView `json:"mismatches"`
}

// MismatchView is what a service has not caught up with.
type MismatchView struct {
	Kind     string `json:"kind"`
	Service  string `json:"service"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
}

func (h *Handler) check(c echo.Context) error {
	ch, err := h.reconciler.Check(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	out := CheckView{OrderID: ch.OrderID, Converged: ch.Converged, Findings: ch.Recorded, Mismatches: []MismatchView{}}
	for _, m := range ch.Mismatches {
		out.Mismatches = append(out.Mismatches, MismatchView{Kind: string(m.Kind), Service: m.Service, Expected: m.Expected, Actual: m.Actual})
	}
	return c.JSON(http.StatusOK, out)
}

// MapError is the one place the service's errors become HTTP answers.
func MapError(err error) *httpapi.Error {
	switch {
	case errors.Is(err, adapters.ErrRunNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeRunNotFound, Message: err.Error()}
	case errors.Is(err, adapters.ErrRunInProgress):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeRunInProgress, Message: err.Error()}
	case errors.Is(err, app.ErrOrderNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeOrderNotFound, Message: err.Error()}
	case errors.Is(err, adapters.ErrUnavailable):
		return &httpapi.Error{Status: http.StatusServiceUnavailable, BusinessCode: CodeUnavailable,
			Message: "a service reconciliation reads is unavailable, try again", Err: err}
	}
	return nil
}
