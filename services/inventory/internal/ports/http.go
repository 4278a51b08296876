// Package ports serves the inventory service's HTTP API (README.md, API):
// stock per SKU, and inventory's view of each order with its stock
// movements.
package ports

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
	"github.com/reliable-orders/fulfillment/services/inventory/inventoryapi"
)

// Store is what the handlers read and write.
type Store interface {
	Stock(ctx context.Context, sku string) (inventory.Stock, error)
	SetAvailable(ctx context.Context, sku string, available int) (inventory.Stock, error)
	Order(ctx context.Context, orderID string) (inventory.Order, error)
	Movements(ctx context.Context, orderID string) ([]inventory.AppliedMovement, error)
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
	return c.JSON(http.StatusOK, inventoryapi.StockResponse{SKU: s.SKU, Available: s.Available, Deducted: s.Deducted})
}

func (h handlers) setStock(c echo.Context) error {
	sku := c.Param("sku")
	if err := inventory.ValidateSKU(sku); err != nil {
		return err
	}
	var req inventoryapi.SetStockRequest
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
	return c.JSON(http.StatusOK, inventoryapi.StockResponse{
		BusinessCode: httpapi.CodeSuccess, SKU: s.SKU, Available: s.Available, Deducted: s.Deducted,
	})
}

func (h handlers) order(c echo.Context) error {
	o, err := h.store.Order(c.Request().Context(), c.Param("orderId"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, inventoryapi.OrderResponse{OrderID: o.ID, Status: string(o.Status), Reason: o.Reason,
		Items: lines(o.Items), Restocked: lines(o.Restocked)})
}

func (h handlers) movements(c echo.Context) error {
	orderID := c.Param("orderId")
	rows, err := h.store.Movements(c.Request().Context(), orderID)
	if err != nil {
		return err
	}
	out := inventoryapi.MovementsResponse{OrderID: orderID, Count: len(rows), Movements: make([]inventoryapi.Movement, len(rows))}
	for i, r := range rows {
		out.Movements[i] = inventoryapi.Movement{EventID: r.EventID, SKU: r.SKU, Delta: r.Delta, Kind: string(r.Kind), CreatedAt: r.CreatedAt.UTC()}
	}
	return c.JSON(http.StatusOK, out)
}

// lines converts the domain's lines, and answers no lines as [], never
// null.
func lines(ls []inventory.Line) []inventoryapi.Line {
	out := make([]inventoryapi.Line, len(ls))
	for i, l := range ls {
		out[i] = inventoryapi.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	return out
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
