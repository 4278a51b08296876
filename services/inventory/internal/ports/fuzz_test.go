package ports_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/ports"
)

// memStore holds SKU-1 (10 available, 2 deducted) and nothing else.
type memStore struct{ stock map[string]inventory.Stock }

func (m *memStore) Stock(_ context.Context, sku string) (inventory.Stock, error) {
	s, ok := m.stock[sku]
	if !ok {
		return inventory.Stock{}, fmt.Errorf("%w: %s", inventory.ErrSKUNotFound, sku)
	}
	return s, nil
}

func (m *memStore) SetAvailable(_ context.Context, sku string, available int) (inventory.Stock, error) {
	if err := inventory.ValidateAvailable(available); err != nil {
		return inventory.Stock{}, err
	}
	s := m.stock[sku]
	s.SKU, s.Available = sku, available
	m.stock[sku] = s
	return s, nil
}

func (m *memStore) Order(_ context.Context, orderID string) (inventory.Order, error) {
	return inventory.Order{ID: orderID, Status: "NONE"}, nil
}

func (m *memStore) Movements(context.Context, string) ([]inventory.AppliedMovement, error) {
	return nil, nil
}

// FuzzSetStock sends any body to PUT /inventory/{sku}, with any SKU: the
// answer is always a 2xx with a businessCode or a 4xx with a JSON
// businessCode, never a 5xx or a panic.
func FuzzSetStock(f *testing.F) {
	f.Add("SKU-1", []byte(`{"available":100}`))
	f.Add("SKU-NEW", []byte(`{"available":0}`))
	f.Add("SKU-1", []byte(`{"available":-1}`))
	f.Add("SKU-1", []byte(`{"available":1e9}`))
	f.Add("SKU-1", []byte(`{"available":"5"}`))
	f.Add("SKU-1", []byte(`{}`))
	f.Add("SKU 1", []byte(`{"available":1}`))
	f.Add("", []byte(`null`))
	f.Add("SKU-\x00", []byte(`{"available":1}`))
	f.Add("SKU-1\n", []byte(`{"available":1,"sku":"\u0000"}`))
	f.Fuzz(func(t *testing.T, sku string, body []byte) {
		store := &memStore{stock: map[string]inventory.Stock{"SKU-1": {SKU: "SKU-1", Available: 10, Deducted: 2}}}
		srv := httpapi.New(httpapi.Config{MapError: ports.MapError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ports.Register(srv.Echo, store)
		rec := httpapitest.Do(srv.Echo, http.MethodPut, "/inventory/"+url.PathEscape(sku), body, nil)
		httpapitest.CheckAnswer(t, rec, true)
	})
}
