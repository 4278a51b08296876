// Package apptest holds an in-memory app.Store for the tests of the order
// service's use cases and of its handlers, which need no database.
package apptest

import (
	"context"
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// Check vets the events a change of o emits before the store keeps them,
// as the repository's writing them to the outbox does; an error refuses
// the change.
type Check func(o *order.Order, events []order.Event) error

// Store keeps orders in memory as the repository does: a change runs on a
// copy, which replaces the order only when the change (and its events'
// Check) succeeds, and a callback applies once. It is not safe for
// concurrent use.
type Store struct {
	check     Check
	orders    map[string]*order.Order
	callbacks map[string]bool
	events    map[string][]order.Event
}

// NewStore returns an empty store whose changes' events pass check (none
// when nil).
func NewStore(check Check) *Store {
	return &Store{check: check, orders: map[string]*order.Order{}, callbacks: map[string]bool{}, events: map[string][]order.Event{}}
}

// Put keeps o as it stands, with no event.
func (s *Store) Put(o *order.Order) { s.orders[o.ID] = o.Clone() }

// Emitted lists the events the store kept of order id, in order.
func (s *Store) Emitted(id string) []order.Event { return s.events[id] }

func (s *Store) keep(o *order.Order, events []order.Event) error {
	if s.check != nil {
		if err := s.check(o, events); err != nil {
			return err
		}
	}
	s.orders[o.ID] = o.Clone()
	s.events[o.ID] = append(s.events[o.ID], events...)
	return nil
}

// Create implements app.Store.
func (s *Store) Create(_ context.Context, o *order.Order, events []order.Event) (*order.Order, bool, error) {
	if existing, ok := s.orders[o.ID]; ok {
		return existing.Clone(), false, nil
	}
	if err := s.keep(o, events); err != nil {
		return nil, false, err
	}
	return o, true, nil
}

// Get implements app.Store.
func (s *Store) Get(_ context.Context, id string) (*order.Order, error) {
	o, ok := s.orders[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", order.ErrNotFound, id)
	}
	return o.Clone(), nil
}

// Update implements app.Store.
func (s *Store) Update(ctx context.Context, id string, change app.Change) (*order.Order, error) {
	current, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	work := current.Clone()
	events, err := change(work)
	if err != nil {
		return current, err
	}
	if err := s.keep(work, events); err != nil {
		return current, err
	}
	return work.Clone(), nil
}

// UpdateOnce implements app.Store.
func (s *Store) UpdateOnce(ctx context.Context, cb order.Callback, change app.Change) (*order.Order, error) {
	if s.callbacks[cb.ID] {
		return s.Get(ctx, cb.OrderID)
	}
	o, err := s.Update(ctx, cb.OrderID, change)
	if err == nil {
		s.callbacks[cb.ID] = true
	}
	return o, err
}

// FenceVersion implements app.Store.
func (s *Store) FenceVersion(ctx context.Context, id string, fence app.Fence) (*order.Order, error) {
	work, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := fence(work); err != nil {
		return nil, err
	}
	s.orders[id] = work
	return work.Clone(), nil
}

// Events implements app.Store: the kept events of order id, none of them
// sent, since no relay runs.
func (s *Store) Events(_ context.Context, id string) ([]app.EventRecord, error) {
	out := make([]app.EventRecord, len(s.events[id]))
	for i, e := range s.events[id] {
		out[i] = app.EventRecord{EventType: string(e.Type), AggregateVersion: e.Version, Status: outbox.StatusPending}
	}
	return out, nil
}

// Records implements app.Store: the orders of ids the store holds, with no
// times and no outbox rows.
func (s *Store) Records(_ context.Context, ids []string) (map[string]app.Record, error) {
	out := map[string]app.Record{}
	for _, id := range ids {
		if o, ok := s.orders[id]; ok {
			out[id] = app.Record{Order: o.Clone()}
		}
	}
	return out, nil
}

// Unknown implements app.Store.
func (s *Store) Unknown(_ context.Context, ids []string) ([]string, error) {
	out := []string{}
	for _, id := range ids {
		if _, ok := s.orders[id]; !ok {
			out = append(out, id)
		}
	}
	return out, nil
}

// ChangedOrders implements app.Store: none, since the store keeps no times.
func (s *Store) ChangedOrders(context.Context, app.ChangedPage) ([]app.Record, error) {
	return nil, nil
}
