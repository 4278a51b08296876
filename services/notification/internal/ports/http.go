// Package ports serves the notification service's HTTP API (README.md,
// API): the notifications of an order.
package ports

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
	"github.com/reliable-orders/fulfillment/services/notification/notificationapi"
)

// Store is what the handlers read.
type Store interface {
	List(ctx context.Context, orderID string) ([]notification.Sent, error)
}

type handlers struct {
	store Store
}

// Register adds the notification routes to e.
func Register(e *echo.Echo, store Store) {
	h := handlers{store: store}
	e.GET("/notifications", h.list)
}

func (h handlers) list(c echo.Context) error {
	orderID := c.QueryParam("orderId")
	if orderID == "" {
		return httpapi.BadRequest("orderId is required")
	}
	sent, err := h.store.List(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	out := notificationapi.ListResponse{OrderID: orderID, Count: len(sent), Items: make([]notificationapi.Item, len(sent))}
	for i, n := range sent {
		out.Items[i] = notificationapi.Item{EventID: n.EventID, Kind: string(n.Kind), Channel: n.Channel, Body: n.Body,
			CreatedAt: n.CreatedAt.UTC()}
	}
	return c.JSON(http.StatusOK, out)
}
