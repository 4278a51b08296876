package ports

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// Monitor keeps the consumers' lag samples.
type Monitor interface {
	Watch() []app.Series
}

// Drills runs the tutorial's drills.
type Drills interface {
	Catalog() []app.DrillCase
	Start(selection, operator string) (app.DrillRun, error)
	Runs() []app.DrillRun
	Get(id int) (app.DrillRun, bool)
}

// Switches flips fail points and, through the control API, processes.
type Switches interface {
	State(ctx context.Context) app.SwitchesView
	ArmFailPoint(ctx context.Context, service, name, action string, times int, operator string) error
	Stop(ctx context.Context, service, operator string) (controlapi.ServiceView, error)
	Start(ctx context.Context, service, operator string) (controlapi.ServiceView, error)
	Scale(ctx context.Context, service string, instances int, operator string) (controlapi.ScaleView, error)
}

// Business codes of the console's own refusals.
const (
	CodeDrillRunning   = "DRILL_RUN_IN_PROGRESS"
	CodeUnknownDrill   = "UNKNOWN_DRILL"
	CodeRunNotFound    = "RUN_NOT_FOUND"
	CodeNoControl      = "NO_CONTROL_API"
	CodeUnknownService = "UNKNOWN_SERVICE"
)

func (h *Handler) consumersPage(c echo.Context) error {
	v := newChartsView(h.monitor.Watch())
	if c.QueryParam("fragment") == "1" {
		return h.renderFragment(c, "consumers.html", "consumers-body", v)
	}
	return h.render(c, http.StatusOK, "consumers.html", "consumers", "Consumers", v)
}

func (h *Handler) consumersJSON(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"consumers": h.monitor.Watch()})
}

// drillsView is the drills page's model.
type drillsView struct {
	Groups   []drillGroup
	Runs     []app.DrillRun
	Operator string
}

type drillGroup struct {
	Drill string
	Cases []string
}

func (h *Handler) drillsPage(c echo.Context) error {
	v := drillsView{Runs: h.drills.Runs(), Operator: Operator(c.Request(), "")}
	for _, dc := range h.drills.Catalog() {
		if n := len(v.Groups); n == 0 || v.Groups[n-1].Drill != dc.Drill {
			v.Groups = append(v.Groups, drillGroup{Drill: dc.Drill})
		}
		v.Groups[len(v.Groups)-1].Cases = append(v.Groups[len(v.Groups)-1].Cases, dc.Name)
	}
	if c.QueryParam("fragment") == "1" {
		return h.renderFragment(c, "drills.html", "drill-runs", v)
	}
	return h.render(c, http.StatusOK, "drills.html", "drills", "Drills", v)
}

// DrillRequest is the body of POST /api/drills/runs.
type DrillRequest struct {
	// Selection is a drill, a case ("loss/after-publish") or "all".
	Selection string `json:"selection"`
	Operator  string `json:"operator"`
}

func (h *Handler) startDrill(c echo.Context) error {
	var req DrillRequest
	if err := httpapi.Bind(c, &req); err != nil {
		return err
	}
	operator := Operator(c.Request(), req.Operator)
	if err := rules.ValidateReason("operator", operator); err != nil {
		return err
	}
	run, err := h.drills.Start(strings.TrimSpace(req.Selection), operator)
	switch {
	case errors.Is(err, app.ErrDrillRunning):
		err = &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeDrillRunning, Message: err.Error()}
	case errors.Is(err, app.ErrUnknownDrill):
		err = &httpapi.Error{Status: http.StatusBadRequest, BusinessCode: CodeUnknownDrill, Message: err.Error()}
	}
	return h.answer(c, http.StatusAccepted, "drills.html", "drill-started", run, err)
}

func (h *Handler) drillRuns(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"runs": h.drills.Runs()})
}

func (h *Handler) drillRun(c echo.Context) error {
	id, err := strconv.Atoi(c.Param("id"))
	if err != nil {
		return httpapi.BadRequest("run id %q: want a number", c.Param("id"))
	}
	run, ok := h.drills.Get(id)
	if !ok {
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeRunNotFound, Message: fmt.Sprintf("no drill run %d is kept", id)}
	}
	return c.JSON(http.StatusOK, run)
}

func (h *Handler) switchesPage(c echo.Context) error {
	v := switchesView{SwitchesView: h.switches.State(c.Request().Context()), Operator: Operator(c.Request(), "")}
	if c.QueryParam("fragment") == "1" {
		return h.renderFragment(c, "switches.html", "switches-body", v)
	}
	return h.render(c, http.StatusOK, "switches.html", "switches", "Switches", v)
}

// switchesView is the switches page's model.
type switchesView struct {
	app.SwitchesView
	Operator string
}

// FailPointRequest is the body of POST /api/failpoints/{service}/{name}.
type FailPointRequest struct {
	// Action is error, exit, panic or off.
	Action string `json:"action"`
	// Times limits how often it fires; 0: every time.
	Times    int    `json:"times"`
	Operator string `json:"operator"`
}

func (h *Handler) armFailPoint(c echo.Context) error {
	var req FailPointRequest
	if err := httpapi.Bind(c, &req); err != nil {
		return err
	}
	operator := Operator(c.Request(), req.Operator)
	if err := rules.ValidateReason("operator", operator); err != nil {
		return err
	}
	if req.Times < 0 {
		return httpapi.BadRequest("times=%d: want 0 (every time) or more", req.Times)
	}
	service, name := c.Param("service"), c.Param("name")
	err := h.switches.ArmFailPoint(c.Request().Context(), service, name, req.Action, req.Times, operator)
	msg := fmt.Sprintf("%s: %s armed %s (%s)", service, operator, name, req.Action)
	if req.Action == "off" {
		msg = fmt.Sprintf("%s: %s disarmed %s", service, operator, name)
	}
	return h.answer(c, http.StatusOK, "switches.html", "switch-result", msg, switchError(err))
}

// ProcessRequest is the body of POST /api/services/{name}/stop|start|scale.
type ProcessRequest struct {
	// Instances is the scale's process count, the service's own included.
	Instances int    `json:"instances"`
	Operator  string `json:"operator"`
}

func (h *Handler) flipProcess(c echo.Context) error {
	var req ProcessRequest
	if err := httpapi.BindOptional(c, &req); err != nil {
		return err
	}
	operator := Operator(c.Request(), req.Operator)
	if err := rules.ValidateReason("operator", operator); err != nil {
		return err
	}
	ctx, service, verb := c.Request().Context(), c.Param("name"), c.Param("verb")
	var msg string
	var err error
	switch verb {
	case "stop":
		var v controlapi.ServiceView
		v, err = h.switches.Stop(ctx, service, operator)
		msg = fmt.Sprintf("%s: stopped by %s (%s)", service, operator, v.State)
	case "start":
		var v controlapi.ServiceView
		v, err = h.switches.Start(ctx, service, operator)
		msg = fmt.Sprintf("%s: started by %s (%s, run %d)", service, operator, v.State, v.Run)
	case "scale":
		if req.Instances < 1 {
			return httpapi.BadRequest("instances=%d: want 1 or more", req.Instances)
		}
		var v controlapi.ScaleView
		v, err = h.switches.Scale(ctx, service, req.Instances, operator)
		msg = fmt.Sprintf("%s: scaled to %d processes by %s", service, len(v.Instances), operator)
	default:
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: httpapi.CodeNotFound, Message: "want stop, start or scale"}
	}
	return h.answer(c, http.StatusOK, "switches.html", "switch-result", msg, switchError(err))
}

// switchError maps the switches' errors to answers.
func switchError(err error) error {
	var se *controlapi.StatusError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, app.ErrNoControl):
		return &httpapi.Error{Status: http.StatusConflict, BusinessCode: CodeNoControl, Message: err.Error()}
	case errors.Is(err, app.ErrUnknownService):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeUnknownService, Message: err.Error()}
	case errors.As(err, &se) && se.Status < http.StatusInternalServerError:
		return &httpapi.Error{Status: se.Status, BusinessCode: "CONTROL_REFUSED", Message: se.Message, Err: err}
	}
	return upstreamError(err)
}

// answer answers a command of a page's script with a fragment (data, or
// the error's message), anything else with JSON.
func (h *Handler) answer(c echo.Context, status int, page, fragment string, data any, err error) error {
	if err != nil {
		apiErr := upstreamError(err)
		if wantsHTML(c) {
			return h.fragment(c, apiErr.Status, page, "error-fragment", apiErr.Message)
		}
		return apiErr
	}
	if wantsHTML(c) {
		return h.fragment(c, status, page, fragment, data)
	}
	if s, ok := data.(string); ok {
		return c.JSON(status, map[string]string{"message": s})
	}
	return c.JSON(status, data)
}
