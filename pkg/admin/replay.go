package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

// DeadLetter answers GET /admin/dlq/{id}: the record and every replay of it.
type DeadLetter struct {
	dlq.Record
	Replays []dlq.ReplayAudit `json:"replays"`
}

// RegisterReplay adds GET /admin/dlq/{id} (inspect) and
// POST /admin/dlq/{id}/replay, which sends a dead letter back to its
// original topic through publisher (see dlq.Store.Replay).
func RegisterReplay(g *echo.Group, store *dlq.Store, publisher message.Publisher) {
	g.GET("/dlq/:id", func(c echo.Context) error {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil {
			return httpapi.BadRequest("dead letter id must be an integer")
		}
		rec, err := store.Get(c.Request().Context(), id)
		if errors.Is(err, dlq.ErrNotFound) {
			return httpapi.NotFound("dead letter %d not found", id)
		}
		if err != nil {
			return err
		}
		replays, err := store.Replays(c.Request().Context(), id)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, DeadLetter{Record: rec, Replays: replays})
	})
	g.POST("/dlq/:id/replay", func(c echo.Context) error {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil {
			return httpapi.BadRequest("dead letter id must be an integer")
		}
		by, err := Operator(c)
		if err != nil {
			return err
		}
		res, err := store.Replay(c.Request().Context(), id, by, PublishWith(publisher))
		if errors.Is(err, dlq.ErrNotFound) {
			return httpapi.NotFound("dead letter %d not found", id)
		}
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, res)
	})
}

// PublishWith adapts a Watermill publisher to dlq.Publish. The key travels
// as the aggregateId header, which pkg/messaging's marshaler turns back into
// the Kafka key.
func PublishWith(publisher message.Publisher) dlq.Publish {
	return func(_ context.Context, topic string, key, value []byte, headers map[string]string) error {
		msg := message.NewMessage(watermill.NewUUID(), value)
		for k, v := range headers {
			msg.Metadata.Set(k, v)
		}
		if len(key) > 0 {
			msg.Metadata.Set(event.HeaderAggregateID, string(key))
		}
		return publisher.Publish(topic, msg)
	}
}
