// Package ports serves the inventory service's HTTP API (README.md, API):
// stock per SKU, and inventory's view of each order with its stock
// movements.
package ports

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// Store is what the handlers read and write.
type Store interface {
	Stock(ctx context.Context, sku string) (inventory.Stock, error)
	SetAvailable(ctx context.Context, sku string, available int) (inventory.Stock, error)
	Order(ctx context.Context, orderID string) (inventory.Order, error)
	Movements(ctx context.Context, orderID string) ([]inventory.AppliedMovement, error)
}

// StockResponse answers GET and PUT /inventory/{sku}.
type StockResponse struct {
	BusinessCode string `json:"businessCode,omitempty"`
	SKU          string `json:"sku"`
	Available    int    `json:"available"`
	Deducted     int    `json:"deducted"`
}

// SetStockRequest is the body of PUT /inventory/{sku}. Available is a
// pointer so a missing field is told apart from zero.
type SetStockRequest struct {
	Available *int `json:"available"`
}

// OrderResponse answers GET /inventory/orders/{orderId}: the order's
// state, what it deducted and what refunds brought back.
type OrderResponse struct {
	OrderID   string           `json:"orderId"`
	Status    string           `json:"status"`
	Reason    string           `json:"reason,omitempty"`
	Items     []inventory.Line `json:"items"`
	Restocked []inventory.Line `json:"restocked"`
}

// Movement is one stock movement in MovementsResponse.
type Movement struct {
	EventID   string    `json:"eventId"`
	SKU       string    `json:"sku"`
	Delta     int       `json:"delta"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"createdAt"`
}

// MovementsResponse answers GET /inventory/orders/{orderId}/movements.
type MovementsResponse struct {
	OrderID   string     `json:"orderId"`
	Count     int        `json:"count"`
	Movements []Movement `json:"movements"`
}

type handlers struct {
	store Store
}

// Register adds the inventory routes to e.
func Register(e *echo.Echo, store Store) {
	h := handlers{store: store}
	e.GET("/inventory/orders/:orderId", h.order)
	e.GET("/inventory/orders/:orderId/movements", h.movements)
	e.GET("/inventory/:sku", h.stock)
	e.PUT("/inventory/:sku", h.setStock)
}

func (h handlers) stock(c echo.Context) error {
	sku := c.Param("sku")
	if err := inventory.ValidateSKU(sku); err != nil {
		return err
	}
	s, err := h.store.Stock(c.Request().Context(), sku)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, StockResponse{SKU: s.SKU, Available: s.Available, Deducted: s.Deducted})
}

func (h handlers) setStock(c echo.Context) error {
	sku := c.Param("sku")
	if err := inventory.ValidateSKU(sku); err != nil {
		return err
	}
	var req SetStockRequest
	if err := httpapi.Bind(c, &req); err != nil {
		return err
	}
	if req.Available == nil {
		return httpapi.BadRequest("available is required")
	}
	if err := inventory.ValidateAvailable(*req.Available); err != nil {
		return err
	}
	s, err := h.store.SetAvailable(c.Request().Context(), sku, *req.Available)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, StockResponse{
		BusinessCode: httpapi.CodeSuccess, SKU: s.SKU, Available: s.Available, Deducted: s.Deducted,
	})
}

func (h handlers) order(c echo.Context) error {
	o, err := h.store.Order(c.Request().Context(), c.Param("orderId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, OrderResponse{OrderID: o.ID, Status: string(o.Status), Reason: o.Reason,
		Items: lines(o.Items), Restocked: lines(o.Restocked)})
}

func (h handlers) movements(c echo.Context) error {
	orderID := c.Param("orderId")
	rows, err := h.store.Movements(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	out := MovementsResponse{OrderID: orderID, Count: len(rows), Movements: make([]Movement, len(rows))}
	for i, r := range rows {
		out.Movements[i] = Movement{EventID: r.EventID, SKU: r.SKU, Delta: r.Delta, Kind: string(r.Kind), CreatedAt: r.CreatedAt.UTC()}
	}
	return c.JSON(http.StatusOK, out)
}

// lines answers no lines as [], never null.
func lines(ls []inventory.Line) []inventory.Line {
	if ls == nil {
		return []inventory.Line{}
	}
	return ls
}

// MapError is the one place inventory errors become HTTP answers.
func MapError(err error) *httpapi.Error {
	switch {
	case errors.Is(err, inventory.ErrSKUNotFound):
		return &httpapi.Error{Status: http.StatusNotFound, BusinessCode: "SKU_NOT_FOUND", Message: err.Error()}
	case errors.Is(err, inventory.ErrInvalidAvailable):
		return httpapi.BadRequest("%v", err)
	}
	return nil
}
