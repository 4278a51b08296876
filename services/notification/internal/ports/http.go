// Package ports serves the notification service's HTTP API (README.md,
// API): the notifications of an order.
package ports

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Store is what the handlers read.
type Store interface {
	List(ctx context.Context, orderID string) ([]notification.Sent, error)
}

// Item is one notification in ListResponse.
type Item struct {
	EventID   string    `json:"eventId"`
	Kind      string    `json:"kind"`
	Channel   string    `json:"channel"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"createdAt"`
}

// ListResponse answers GET /notifications?orderId=.
type ListResponse struct {
	OrderID string `json:"orderId"`
	Count   int    `json:"count"`
	Items   []Item `json:"items"`
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
	out := ListResponse{OrderID: orderID, Count: len(sent), Items: make([]Item, len(sent))}
	for i, n := range sent {
		out.Items[i] = Item{EventID: n.EventID, Kind: string(n.Kind), Channel: n.Channel, Body: n.Body,
			CreatedAt: n.CreatedAt.UTC()}
	}
	return c.JSON(http.StatusOK, out)
}
