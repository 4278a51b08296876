// Package app is the order service's use cases: the commands on an order
// (create, check out, refund, cancel, apply a callback, fence its version)
// and the queries the API and reconciliation answer from. A command is one
// domain call that the store runs as a closure inside one transaction,
// under the order's row lock, with the events the call returns; the ports
// call these use cases and map their answers, and the adapters implement
// the Store and Peers declared here.
package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// DefaultCancelReason is the reason of a cancellation that gives none.
const DefaultCancelReason = "CANCELLED_ON_REQUEST"

// Change is one domain call on an order, run by the store inside the
// transaction that saves it: it changes the order it is given and returns
// the events of the change; none means nothing changed (an idempotent
// repeat), and an error rolls everything back.
type Change func(*order.Order) ([]order.Event, error)

// Fence is a version fence on an order, run by the store inside the
// transaction that saves it: it reports whether it raised the version.
type Fence func(*order.Order) (bool, error)

// Store keeps orders: each write is one transaction in which the order
// row, its refunds and the outbox rows of its events change together.
type Store interface {
	// Create stores o with events unless an order with o's id exists; it
	// then writes nothing and returns the stored order and false.
	Create(ctx context.Context, o *order.Order, events []order.Event) (*order.Order, bool, error)
	Get(ctx context.Context, id string) (*order.Order, error)
	// Update runs change on order id under its row lock and stores the
	// result. It returns the order as stored afterwards; when change fails,
	// the order as it was and the error.
	Update(ctx context.Context, id string, change Change) (*order.Order, error)
	// UpdateOnce is Update of cb's order that records cb in the same
	// transaction and changes nothing when cb was recorded already.
	UpdateOnce(ctx context.Context, cb order.Callback, change Change) (*order.Order, error)
	// FenceVersion runs fence on order id under its row lock and stores
	// the version it reached, with no event.
	FenceVersion(ctx context.Context, id string, fence Fence) (*order.Order, error)
	Events(ctx context.Context, id string) ([]EventRecord, error)
	Records(ctx context.Context, ids []string) (map[string]Record, error)
	Unknown(ctx context.Context, ids []string) ([]string, error)
	ChangedOrders(ctx context.Context, p ChangedPage) ([]Record, error)
}

// Peers reads what the other services know of an order.
type Peers interface {
	View(ctx context.Context, orderID string) PeerView
}

// EventRecord is one outbox row of an order, for drills that follow an
// order's events through the relay.
type EventRecord struct {
	EventID          string
	EventType        string
	AggregateVersion int64
	Status           string
	Attempts         int
	CreatedAt        time.Time
	SentAt           *time.Time
}

// Record is an order as reconciliation reads it: the aggregate, when it
// was created and last changed, and its outbox rows, oldest first.
type Record struct {
	Order     *order.Order
	CreatedAt time.Time
	UpdatedAt time.Time
	Events    []outbox.Event
}

// ChangedPage selects a page of orders by when they last changed: those
// whose (updated_at, order_id) comes after (After, AfterID), changed before
// Before unless it is zero, the first Limit in that order.
type ChangedPage struct {
	After   time.Time
	AfterID string
	Before  time.Time
	Limit   int
}

// PeerView is what the other services know about one order.
type PeerView struct {
	Payment       string
	Inventory     string
	PointsLedger  int
	Notifications int
	DLQ           int
	// Converged is reconciliation's verdict (every service has reached
	// what the order's state requires); nil when it could not be read.
	Converged *bool
	// Findings is how many findings reconciliation runs recorded for the
	// order; -1 when it could not be read.
	Findings int
}

// Snapshot is an order and what every other service knows of it.
type Snapshot struct {
	Order *order.Order
	Peers PeerView
}

// Orders is the order service's use cases over its store and peers.
type Orders struct {
	store Store
	peers Peers
}

// NewOrders returns the use cases over store and peers.
func NewOrders(store Store, peers Peers) *Orders {
	return &Orders{store: store, peers: peers}
}

// Create stores a new order with its OrderCreated event. The same order
// again (same id and content) is a repeat that returns the stored order,
// in whatever state it has reached; another order under that id is
// order.ErrExists.
func (s *Orders) Create(ctx context.Context, o *order.Order) (*order.Order, error) {
	stored, created, err := s.store.Create(ctx, o, []order.Event{o.CreatedEvent()})
	if err != nil {
		return nil, err
	}
	if !created && !stored.SameContent(o) {
		return nil, fmt.Errorf("%w: %s", order.ErrExists, o.ID)
	}
	return stored, nil
}

// Get returns order id or order.ErrNotFound.
func (s *Orders) Get(ctx context.Context, id string) (*order.Order, error) {
	return s.store.Get(ctx, id)
}

// Checkout moves order id to PENDING_PAYMENT. Like every command it
// returns the order as it stands, also with a business rejection.
func (s *Orders) Checkout(ctx context.Context, id string) (*order.Order, error) {
	return s.store.Update(ctx, id, func(o *order.Order) ([]order.Event, error) { return o.Checkout() })
}

// RequestRefund asks for req on order id.
func (s *Orders) RequestRefund(ctx context.Context, id string, req order.RefundRequest) (*order.Order, error) {
	return s.store.Update(ctx, id, func(o *order.Order) ([]order.Event, error) { return o.RequestRefund(req) })
}

// Cancel cancels order id for reason, checked as given (a control
// character at either end is refused, not trimmed away), then trimmed;
// no reason is DefaultCancelReason.
func (s *Orders) Cancel(ctx context.Context, id, reason string) (*order.Order, error) {
	if err := rules.ValidateReason("reason", reason); err != nil {
		return nil, err
	}
	reason = strings.TrimSpace(reason)
	if reason == "" {
		reason = DefaultCancelReason
	}
	return s.store.Update(ctx, id, func(o *order.Order) ([]order.Event, error) { return o.Cancel(reason) })
}

// ApplyCallback applies a payment or stock callback once: a re-delivery
// of its callback id changes nothing, even after the order moved on.
func (s *Orders) ApplyCallback(ctx context.Context, cb order.Callback) (*order.Order, error) {
	return s.store.UpdateOnce(ctx, cb, func(o *order.Order) ([]order.Event, error) { return o.ApplyCallback(cb) })
}

// FenceVersion raises the version of order id to at least atLeast with no
// event (order.FenceVersion): the fence put on an order restored from an
// earlier backup.
func (s *Orders) FenceVersion(ctx context.Context, id string, atLeast int64) (*order.Order, error) {
	return s.store.FenceVersion(ctx, id, func(o *order.Order) (bool, error) { return o.FenceVersion(atLeast) })
}

// Snapshot returns order id and what every other service knows of it.
func (s *Orders) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	o, err := s.store.Get(ctx, id)
	if err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Order: o, Peers: s.peers.View(ctx, o.ID)}, nil
}

// Events returns the outbox rows of order id, oldest first, or
// order.ErrNotFound.
func (s *Orders) Events(ctx context.Context, id string) ([]EventRecord, error) {
	o, err := s.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.store.Events(ctx, o.ID)
}

// Records returns the stored orders among ids, by id.
func (s *Orders) Records(ctx context.Context, ids []string) (map[string]Record, error) {
	return s.store.Records(ctx, ids)
}

// Unknown returns those of ids no order has, in the order given.
func (s *Orders) Unknown(ctx context.Context, ids []string) ([]string, error) {
	return s.store.Unknown(ctx, ids)
}

// Changed returns the page p selects.
func (s *Orders) Changed(ctx context.Context, p ChangedPage) ([]Record, error) {
	return s.store.ChangedOrders(ctx, p)
}
