// Package admin registers the operator endpoints every consumer shares:
// GET /admin/processed-events/{eventId}, GET /admin/dlq?aggregateId=&status=
// and POST /admin/dlq/{id}/replay; the outbox endpoints of the services
// with an outbox; and the parts every service's reconciliation view shares
// (the request, a consumer's version and dead letters).
package admin

import (
	"net/http"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
)

// ProcessedEvent answers GET /admin/processed-events/{eventId}.
type ProcessedEvent struct {
	EventID  string `json:"eventId"`
	Consumer string `json:"consumer"`
	Count    int    `json:"count"`
	// Duplicates counts the copies delivered after the first that the
	// consumer recognised as duplicates.
	Duplicates int `json:"duplicates"`
}

// DeadLetters answers GET /admin/dlq.
type DeadLetters struct {
	Count int          `json:"count"`
	Items []dlq.Record `json:"items"`
}

// RegisterConsumer adds the consumer endpoints to the admin group.
func RegisterConsumer(g *echo.Group, db *sqlx.DB, consumer string, store *dlq.Store) {
	g.GET("/processed-events/:eventId", func(c echo.Context) error {
		id := c.Param("eventId")
		r, err := inbox.Lookup(c.Request().Context(), db, consumer, id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, ProcessedEvent{EventID: id, Consumer: consumer, Count: r.Count, Duplicates: r.Duplicates})
	})
	g.GET("/dlq", func(c echo.Context) error {
		items, err := store.Find(c.Request().Context(), dlq.Filter{AggregateID: c.QueryParam("aggregateId"), Status: c.QueryParam("status")})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, DeadLetters{Count: len(items), Items: items})
	})
}

// FailPointRequest arms a fail point: PUT /admin/failpoints/{name}.
type FailPointRequest struct {
	Action string `json:"action"`
	// Times limits how often it fires; 0 means every time.
	Times int `json:"times"`
}

// FailPoints answers GET /admin/failpoints: every point the service
// declares, armed or not, sorted by name.
type FailPoints struct {
	Points []failpoint.Point `json:"points"`
}

// CodeUnknownFailPoint answers a fail point name the service does not
// declare; the message lists the ones it does.
const CodeUnknownFailPoint = "UNKNOWN_FAIL_POINT"

// RegisterFailPoints lets tests and drills arm fail points at run time
// (PUT /admin/failpoints/{name} {"action":"error","times":2}) and see
// what fired (GET /admin/failpoints: action, remaining and hits of each).
// A name the service does not declare is a 404 UNKNOWN_FAIL_POINT.
func RegisterFailPoints(g *echo.Group, fp *failpoint.Registry) {
	g.GET("/failpoints", func(c echo.Context) error {
		return c.JSON(http.StatusOK, FailPoints{Points: fp.List()})
	})
	g.PUT("/failpoints/:name", func(c echo.Context) error {
		var req FailPointRequest
		if err := httpapi.Bind(c, &req); err != nil {
			return err
		}
		times := req.Times
		if times <= 0 {
			times = failpoint.Unlimited
		}
		if err := fp.Set(c.Param("name"), req.Action, times); err != nil {
			return mapError(err)
		}
		return c.JSON(http.StatusOK, FailPointSet{Name: c.Param("name"), Action: req.Action, Times: req.Times})
	})
}
