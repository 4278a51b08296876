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
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// DeadLetters lists and replays the consumers' dead letters.
type DeadLetters interface {
	List(ctx context.Context, status string) ([]app.DeadLetter, []app.Unread)
	Replay(ctx context.Context, service string, id int64, operator, key string) (suiteapi.ReplayResult, error)
}

// ReplayRequest is the body of POST /api/dlq/{service}/{id}/replay.
type ReplayRequest struct {
	// Operator names who asks, for the audit; the user name of basic
	// authentication wins over it.
	Operator string `json:"operator"`
	// Key is the Idempotency-Key of the replay: the page gives each
	// button its own, so pressing it twice replays once.
	Key string `json:"key"`
}

// dlqView is the dead-letter page's model.
type dlqView struct {
	Status   string
	Items    []dlqRow
	Unread   []app.Unread
	Operator string
}

type dlqRow struct {
	app.DeadLetter
	// Key is the Idempotency-Key of this row's replay button.
	Key string
}

// CodeNotAConsumer answers a replay of a service that keeps no dead
// letters.
const CodeNotAConsumer = "NOT_A_CONSUMER"

func (h *Handler) dlqPage(c echo.Context) error {
	status := strings.ToUpper(c.QueryParam("status"))
	switch status {
	case "":
		status = app.StatusDead
	case app.StatusDead, app.StatusReplayed, "ALL":
	default:
		return httpapi.BadRequest("status=%q: want DEAD, REPLAYED or ALL", status)
	}
	filter := status
	if filter == "ALL" {
		filter = ""
	}
	items, unread := h.dlq.List(c.Request().Context(), filter)
	v := dlqView{Status: status, Unread: unread, Operator: Operator(c.Request(), "")}
	for _, d := range items {
		key, err := suiteapi.NewIdempotencyKey()
		if err != nil {
			return err
		}
		v.Items = append(v.Items, dlqRow{DeadLetter: d, Key: key})
	}
	if c.QueryParam("fragment") == "1" {
		return h.renderFragment(c, "dlq.html", "dlq-body", v)
	}
	return h.render(c, http.StatusOK, "dlq.html", "dlq", "Dead letters", v)
}

// replayResult is the fragment a replay answers a page with.
type replayResult struct {
	Service  string
	ID       int64
	Operator string
	Result   suiteapi.ReplayResult
	Error    string
}

func (h *Handler) replay(c echo.Context) error {
	service := c.Param("service")
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return httpapi.BadRequest("dead letter id %q: want a positive number", c.Param("id"))
	}
	var req ReplayRequest
	if err := httpapi.BindOptional(c, &req); err != nil {
		return err
	}
	if req.Key != "" && len(req.Key) > 255 {
		return httpapi.BadRequest("key: at most 255 characters")
	}
	operator := Operator(c.Request(), req.Operator)
	// The audit stores and shows it: one line, no control characters.
	if err := rules.ValidateReason("operator", operator); err != nil {
		return err
	}
	res, err := h.dlq.Replay(c.Request().Context(), service, id, operator, req.Key)
	if err != nil {
		apiErr := upstreamError(err)
		if wantsHTML(c) {
			return h.fragment(c, apiErr.Status, "dlq.html", "replay-result", replayResult{Service: service, ID: id, Operator: operator, Error: apiErr.Message})
		}
		return apiErr
	}
	if wantsHTML(c) {
		return h.fragment(c, http.StatusOK, "dlq.html", "replay-result", replayResult{Service: service, ID: id, Operator: operator, Result: res})
	}
	return c.JSON(http.StatusOK, res)
}

// fragment renders one template of a page with data alone: the answer to
// a page's script.
func (h *Handler) fragment(c echo.Context, status int, page, name string, data any) error {
	var b strings.Builder
	if err := h.pages[page].ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("render %s %s: %w", page, name, err)
	}
	return c.HTML(status, b.String())
}

// wantsHTML reports whether the request is the page's script, which asks
// for a fragment to show.
func wantsHTML(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), echo.MIMETextHTML)
}

// CodeUpstreamUnavailable answers a request the service it needs did not
// answer.
const CodeUpstreamUnavailable = "UPSTREAM_UNAVAILABLE"

// upstreamError is the answer to an error of a call the console made for
// its user: the service's own refusal as it came, an unknown consumer as
// 404, anything else as 502.
func upstreamError(err error) *httpapi.Error {
	var se *suiteapi.StatusError
	var apiErr *httpapi.Error
	var ruleErr *rules.RuleError
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &ruleErr):
		return httpapi.BadRequest("%s", ruleErr.Error())
	case errors.Is(err, app.ErrNotAConsumer):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: CodeNotAConsumer, Message: err.Error()}
	case errors.As(err, &se) && se.Status < http.StatusInternalServerError:
		msg := se.Message
		if msg == "" {
			msg = se.Body
		}
		return &httpapi.Error{Status: se.Status, BusinessCode: se.BusinessCode, Message: msg, Err: err}
	default:
		return &httpapi.Error{Status: http.StatusBadGateway, BusinessCode: CodeUpstreamUnavailable, Message: err.Error(), Err: err}
	}
}
