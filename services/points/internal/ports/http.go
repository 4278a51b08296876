// Package ports serves the points service's HTTP API (README.md, API): an
// order's ledger entries and a customer's balance.
package ports

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
	"github.com/reliable-orders/fulfillment/services/points/pointsapi"
)

// Store is what the handlers read.
type Store interface {
	Entries(ctx context.Context, orderID string) ([]points.LedgerEntry, error)
	Balance(ctx context.Context, customerID string) (int64, error)
	// State is the order's points state (NONE for an order never seen).
	State(ctx context.Context, orderID string) (points.State, error)
}

type handlers struct {
	store Store
}

// Register adds the points routes to e.
func Register(e *echo.Echo, store Store) {
	h := handlers{store: store}
	e.GET("/points/orders/:orderId", h.order)
	e.GET("/points/customers/:customerId", h.balance)
}

func (h handlers) order(c echo.Context) error {
	ctx := c.Request().Context()
	orderID := c.Param("orderId")
	state, err := h.store.State(ctx, orderID)
	if err != nil {
		return err
	}
	entries, err := h.store.Entries(ctx, orderID)
	if err != nil {
		return err
	}
	out := pointsapi.OrderResponse{OrderID: orderID, Status: string(state), Count: len(entries), Entries: make([]pointsapi.Entry, len(entries))}
	for i, e := range entries {
		out.Entries[i] = entry(e)
	}
	return c.JSON(http.StatusOK, out)
}

func entry(e points.LedgerEntry) pointsapi.Entry {
	return pointsapi.Entry{EventID: e.EventID, Type: string(e.Type), Points: e.Points,
		Amount: e.Amount.StringFixed(2), CreatedAt: e.CreatedAt.UTC()}
}

func (h handlers) balance(c echo.Context) error {
	customerID := c.Param("customerId")
	n, err := h.store.Balance(c.Request().Context(), customerID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pointsapi.BalanceResponse{CustomerID: customerID, Balance: n})
}
