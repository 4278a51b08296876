// Package ports serves the points service's HTTP API (README.md, API): an
// order's ledger entries and a customer's balance.
package ports

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/reliable-orders/fulfillment/services/points/internal/domain/points"
)

// Store is what the handlers read.
type Store interface {
	Entries(ctx context.Context, orderID string) ([]points.LedgerEntry, error)
	Balance(ctx context.Context, customerID string) (int64, error)
	// State is the order's points state (NONE for an order never seen).
	State(ctx context.Context, orderID string) (points.State, error)
}

// Entry is one ledger entry in OrderResponse.
type Entry struct {
	EventID   string    `json:"eventId"`
	Type      string    `json:"type"`
	Points    int64     `json:"points"`
	Amount    string    `json:"amount"`
	CreatedAt time.Time `json:"createdAt"`
}

// OrderResponse answers GET /points/orders/{orderId}. Status names where
// the order stands (EARNED, PARTIALLY_REVERSED, REVERSED), which the
// entries alone leave to arithmetic.
type OrderResponse struct {
	OrderID string  `json:"orderId"`
	Status  string  `json:"status"`
	Count   int     `json:"count"`
	Entries []Entry `json:"entries"`
}

// BalanceResponse answers GET /points/customers/{customerId}.
type BalanceResponse struct {
	CustomerID string `json:"customerId"`
	Balance    int64  `json:"balance"`
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
	out := OrderResponse{OrderID: orderID, Status: string(state), Count: len(entries), Entries: make([]Entry, len(entries))}
	for i, e := range entries {
		out.Entries[i] = entry(e)
	}
	return c.JSON(http.StatusOK, out)
}

func entry(e points.LedgerEntry) Entry {
	return Entry{EventID: e.EventID, Type: string(e.Type), Points: e.Points,
		Amount: e.Amount.StringFixed(2), CreatedAt: e.CreatedAt.UTC()}
}

func (h handlers) balance(c echo.Context) error {
	customerID := c.Param("customerId")
	n, err := h.store.Balance(c.Request().Context(), customerID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, BalanceResponse{CustomerID: customerID, Balance: n})
}
