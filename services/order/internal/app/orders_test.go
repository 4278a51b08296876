package app_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// memStore keeps orders in memory as the repository does: a change runs on
// a copy, which replaces the order only when the change succeeds.
type memStore struct {
	orders    map[string]*order.Order
	callbacks map[string]bool
	events    map[string][]order.Event
}

func newStore() *memStore {
	return &memStore{orders: map[string]*order.Order{}, callbacks: map[string]bool{}, events: map[string][]order.Event{}}
}

func (m *memStore) Create(_ context.Context, o *order.Order, events []order.Event) (*order.Order, bool, error) {
	if existing, ok := m.orders[o.ID]; ok {
		return existing.Clone(), false, nil
	}
	m.orders[o.ID] = o.Clone()
	m.events[o.ID] = append(m.events[o.ID], events...)
	return o, true, nil
}

func (m *memStore) Get(_ context.Context, id string) (*order.Order, error) {
	o, ok := m.orders[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", order.ErrNotFound, id)
	}
	return o.Clone(), nil
}

func (m *memStore) Update(ctx context.Context, id string, change app.Change) (*order.Order, error) {
	current, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	work := current.Clone()
	events, err := change(work)
	if err != nil {
		return current, err
	}
	m.orders[id] = work
	m.events[id] = append(m.events[id], events...)
	return work.Clone(), nil
}

func (m *memStore) UpdateOnce(ctx context.Context, cb order.Callback, change app.Change) (*order.Order, error) {
	if m.callbacks[cb.ID] {
		return m.Get(ctx, cb.OrderID)
	}
	o, err := m.Update(ctx, cb.OrderID, change)
	if err == nil {
		m.callbacks[cb.ID] = true
	}
	return o, err
}

func (m *memStore) FenceVersion(ctx context.Context, id string, fence app.Fence) (*order.Order, error) {
	work, err := m.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := fence(work); err != nil {
		return nil, err
	}
	m.orders[id] = work
	return work.Clone(), nil
}

func (m *memStore) Events(context.Context, string) ([]app.EventRecord, error) { return nil, nil }

func (m *memStore) Records(context.Context, []string) (map[string]app.Record, error) { return nil, nil }

func (m *memStore) Unknown(context.Context, []string) ([]string, error) { return nil, nil }

func (m *memStore) ChangedOrders(context.Context, app.ChangedPage) ([]app.Record, error) {
	return nil, nil
}

func newOrder(t *testing.T, id, customer string) *order.Order {
	t.Helper()
	o, err := order.New(id, customer, "CNY", []order.Item{{SKU: "SKU-1", Quantity: 2, UnitPrice: decimal.RequireFromString("40.00")}})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// Creating an order stores it with OrderCreated; the same order again is
// a repeat that answers the stored one as it stands, another order under
// its id ErrExists.
func TestCreate(t *testing.T) {
	store := newStore()
	orders := app.NewOrders(store, nil)
	ctx := context.Background()
	if _, err := orders.Create(ctx, newOrder(t, "O-1", "C-1")); err != nil {
		t.Fatal(err)
	}
	if got := store.events["O-1"]; len(got) != 1 || got[0].Type != order.EventCreated {
		t.Fatalf("events %+v, want OrderCreated", got)
	}
	if _, err := orders.Checkout(ctx, "O-1"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		customer string
		want     error
	}{
		{"the same order again", "C-1", nil},
		{"another order under its id", "C-2", order.ErrExists},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := orders.Create(ctx, newOrder(t, "O-1", tt.customer))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Create = %v, want %v", err, tt.want)
			}
			if err == nil && o.Status != order.StatusPendingPayment {
				t.Fatalf("repeat answers %s, want the stored order (%s)", o.Status, order.StatusPendingPayment)
			}
			if n := len(store.events["O-1"]); n != 2 {
				t.Fatalf("%d events, want 2: a repeat writes none", n)
			}
		})
	}
}

// A cancellation's reason is checked as sent, then trimmed; none is
// DefaultCancelReason.
func TestCancelReason(t *testing.T) {
	tests := []struct {
		name, reason, want string
		refused            bool
	}{
		{"given", "changed my mind", "changed my mind", false},
		{"trimmed", "  too late ", "too late", false},
		{"none", "", app.DefaultCancelReason, false},
		{"spaces only", "   ", app.DefaultCancelReason, false},
		{"a line break at the end", "x\n", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore()
			orders := app.NewOrders(store, nil)
			ctx := context.Background()
			if _, err := orders.Create(ctx, newOrder(t, "O-1", "C-1")); err != nil {
				t.Fatal(err)
			}
			o, err := orders.Cancel(ctx, "O-1", tt.reason)
			if tt.refused {
				var rerr *rules.RuleError
				if !errors.As(err, &rerr) || rerr.Field != "reason" {
					t.Fatalf("Cancel = %v, want a RuleError on reason", err)
				}
				return
			}
			if err != nil || o.Status != order.StatusCancelled || o.Reason != tt.want {
				t.Fatalf("Cancel = %+v, %v; want CANCELLED for %q", o, err, tt.want)
			}
		})
	}
}

// A callback applies once: a re-delivery of its id changes nothing.
func TestApplyCallbackOnce(t *testing.T) {
	store := newStore()
	orders := app.NewOrders(store, nil)
	ctx := context.Background()
	if _, err := orders.Create(ctx, newOrder(t, "O-1", "C-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := orders.Checkout(ctx, "O-1"); err != nil {
		t.Fatal(err)
	}
	cb := order.Callback{ID: "E-pay", Type: rules.CallbackPaymentSucceeded, OrderID: "O-1", PaymentID: "P-1",
		Amount: decimal.RequireFromString("80.00"), Currency: "CNY"}
	for range 2 {
		o, err := orders.ApplyCallback(ctx, cb)
		if err != nil || o.Status != order.StatusPaid || o.Version != 3 {
			t.Fatalf("ApplyCallback = %+v, %v; want PAID at version 3", o, err)
		}
	}
}
