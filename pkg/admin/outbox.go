package admin

import (
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// OutboxBacklog answers GET /admin/outbox: how many outbox rows wait for
// the relay and how long the oldest has waited. The same figures are the
// outbox_pending_events and outbox_oldest_pending_age_seconds gauges.
type OutboxBacklog struct {
	Pending                 int     `json:"pending"`
	OldestPendingAgeSeconds float64 `json:"oldestPendingAgeSeconds"`
	// Events are the rows of the aggregate asked for with ?aggregateId=,
	// oldest first: status, attempts and next_attempt_at of each.
	Events []outbox.Status `json:"events,omitempty"`
}

// RegisterOutbox adds the outbox endpoints to the admin group of a service
// with an outbox:
//   - GET /outbox: the backlog, so a backlog drill reads the producer side
//     of the queue next to the consumers' GET /admin/lag; with
//     ?aggregateId= also that aggregate's rows, which is how an outage
//     drill follows an event or a callback;
//   - GET /outbox/{eventId}: one row and what the relay did with it;
//   - POST /outbox/{eventId}/republish: the row is sent again with the same
//     event id (outbox.Republish), which is how reconciliation repairs an
//     event a consumer never applied. It answers the row as GET shows it.
//
// An unknown event id is a 404.
func RegisterOutbox(g *echo.Group, db sqlx.ExtContext) {
	g.GET("/outbox", func(c echo.Context) error {
		ctx := c.Request().Context()
		b, err := outbox.PendingBacklog(ctx, db)
		if err != nil {
			return err
		}
		out := OutboxBacklog{Pending: b.Pending, OldestPendingAgeSeconds: b.OldestAge.Seconds()}
		if id := c.QueryParam("aggregateId"); id != "" {
			if out.Events, err = outbox.ForAggregate(ctx, db, id); err != nil {
				return err
			}
		}
		return c.JSON(http.StatusOK, out)
	})
	g.GET("/outbox/:eventId", func(c echo.Context) error {
		s, err := outbox.Lookup(c.Request().Context(), db, c.Param("eventId"))
		if err != nil {
			return mapError(err)
		}
		return c.JSON(http.StatusOK, s)
	})
	g.POST("/outbox/:eventId/republish", func(c echo.Context) error {
		id := c.Param("eventId")
		if err := rules.ValidateID("eventId", id); err != nil {
			return err
		}
		operator, err := Operator(c)
		if err != nil {
			return err
		}
		s, err := outbox.Republish(c.Request().Context(), db, id, operator)
		if err != nil {
			return mapError(err)
		}
		return c.JSON(http.StatusOK, s)
	})
}

// CodeEventNotFound answers an event id the outbox does not hold.
const CodeEventNotFound = "EVENT_NOT_FOUND"
