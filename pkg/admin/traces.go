package admin

import (
	"net/http"
	"regexp"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// DefaultTracesLimit is how many spans GET /admin/traces answers without a
// trace id or a limit.
const DefaultTracesLimit = 200

// TracesView answers GET /admin/traces.
type TracesView struct {
	TraceID string         `json:"traceId,omitempty"`
	Count   int            `json:"count"`
	Spans   []tracing.Span `json:"spans"`
}

var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// RegisterTraces serves GET /admin/traces on g, the service's admin group (so
// behind its token, or on loopback only): ?traceId= the spans of one
// trace this service kept, or without it the newest ?limit= spans
// (DefaultTracesLimit). The console reads it..
func RegisterTraces(g *echo.Group, r *tracing.Recent) {
	g.GET("/traces", func(c echo.Context) error {
		traceID := c.QueryParam("traceId")
		if traceID != "" && !traceIDPattern.MatchString(traceID) {
			return httpapi.BadRequest("traceId=%q: want 32 lowercase hex digits", traceID)
		}
		limit := DefaultTracesLimit
		if v := c.QueryParam("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > tracing.MaxRecentSpans {
				return httpapi.BadRequest("limit=%q: want 1 to %d", v, tracing.MaxRecentSpans)
			}
			limit = n
		}
		spans := r.Spans(traceID, limit)
		return c.JSON(http.StatusOK, TracesView{TraceID: traceID, Count: len(spans), Spans: spans})
	})
}
