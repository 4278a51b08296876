// Package ports serves the shipping service's HTTP API: an order's
// shipment with the history of the events that changed it.
package ports

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/domain/shipping"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/rules"
)

// Store is what the handlers read.
type Store interface {
	Shipment(ctx context.Context, orderID string) (shipping.Shipment, error)
	History(ctx context.Context, orderID string) ([]shipping.Applied, error)
}

// Change is one applied event in ShipmentResponse: the status and goods to
// ship it left.
type Change struct {
	EventID   string          `json:"eventId"`
	EventType string          `json:"eventType"`
	Status    string          `json:"status"`
	Items     []shipping.Line `json:"items"`
	AppliedAt time.Time       `json:"appliedAt"`
}

// ShipmentResponse answers GET /shipments/{orderId}: what is still to
// ship, what the order paid for, and every event that changed it, in the
// order they were applied (one each, however often it was delivered).
type ShipmentResponse struct {
	OrderID string          `json:"orderId"`
	Status  string          `json:"status"`
	Items   []shipping.Line `json:"items"`
	Ordered []shipping.Line `json:"ordered"`
	History []Change        `json:"history"`
}

type handlers struct {
	store Store
}

// Register adds the shipping routes to e.
func Register(e *echo.Echo, store Store) {
	h := handlers{store: store}
	e.GET("/shipments/:orderId", h.shipment)
}

func (h handlers) shipment(c echo.Context) error {
	ctx := c.Request().Context()
	orderID := c.Param("orderId")
	if err := rules.ValidateID("orderId", orderID); err != nil {
		return err
	}
	s, err := h.store.Shipment(ctx, orderID)
	if err != nil {
		return err
	}
	history, err := h.store.History(ctx, orderID)
	if err != nil {
		return err
	}
	out := ShipmentResponse{OrderID: s.OrderID, Status: string(s.Status), Items: lines(s.ToShip),
		Ordered: lines(s.Ordered), History: make([]Change, len(history))}
	for i, a := range history {
		out.History[i] = Change{EventID: a.EventID, EventType: string(a.EventType), Status: string(a.Status),
			Items: lines(a.ToShip), AppliedAt: a.AppliedAt}
	}
	return c.JSON(http.StatusOK, out)
}

// lines answers no lines as [], never null.
func lines(ls []shipping.Line) []shipping.Line {
	if ls == nil {
		return []shipping.Line{}
	}
	return ls
}

// MapError is the one place shipping errors become HTTP answers; a value
// breaking a rule of pkg/event is already a 400 in every service.
func MapError(err error) *httpapi.Error {
	if errors.Is(err, shipping.ErrNotFound) {
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: "SHIPMENT_NOT_FOUND", Message: err.Error()}
	}
	return nil
}
