package admin

import (
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
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

// RegisterOutboxBacklog adds GET /outbox to the admin group of a service
// with an outbox, so a backlog drill reads the producer side of the queue
// next to the consumers' GET /admin/lag. With ?aggregateId= it also lists
// that aggregate's rows, which is how an outage drill follows a callback.
func RegisterOutboxBacklog(g *echo.Group, q sqlx.QueryerContext) {
	g.GET("/outbox", func(c echo.Context) error {
		ctx := c.Request().Context()
		b, err := outbox.PendingBacklog(ctx, q)
		if err != nil {
			return err
		}
		out := OutboxBacklog{Pending: b.Pending, OldestPendingAgeSeconds: b.OldestAge.Seconds()}
		if id := c.QueryParam("aggregateId"); id != "" {
			if out.Events, err = outbox.ForAggregate(ctx, q, id); err != nil {
				return err
			}
		}
		return c.JSON(http.StatusOK, out)
	})
}

// RegisterOutboxRepublish adds POST /outbox/{eventId}/republish to the
// admin group of a service with an outbox: the row is sent again with the
// same event id (outbox.Republish), which is how reconciliation repairs an
// event a consumer never applied. It answers the row as GET
// /admin/outbox/{eventId} shows it; an unknown id is an error wrapping
// outbox.ErrNotFound, which the service's MapError answers with 404.
func RegisterOutboxRepublish(g *echo.Group, q sqlx.ExtContext) {
	g.POST("/outbox/:eventId/republish", func(c echo.Context) error {
		id := c.Param("eventId")
		if err := event.ValidateID("eventId", id); err != nil {
			return err
		}
		s, err := outbox.Republish(c.Request().Context(), q, id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, s)
	})
}
