package adapters_test

import (
	"errors"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// A fence raises the stored version without an event, never lowers it,
// and the next change is written at the version after the fence.
func TestFenceVersion(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	repo := adapters.NewRepository(db, topic, nil, nil)
	if _, err := orders(repo).Create(ctx(t), newOrder(t, "O-1")); err != nil {
		t.Fatal(err)
	}
	fenced, err := orders(repo).FenceVersion(ctx(t), "O-1", 5)
	if err != nil {
		t.Fatal(err)
	}
	if status, version := storedStatus(t, db, "O-1"); fenced.Version != 5 || status != "CREATED" || version != 5 {
		t.Fatalf("after a fence at 5: answered v%d, row %s v%d; want CREATED v5", fenced.Version, status, version)
	}
	if rows := outboxRows(t, db, "O-1"); len(rows) != 1 {
		t.Fatalf("the fence wrote %d outbox rows, want only OrderCreated's", len(rows))
	}
	lower, err := orders(repo).FenceVersion(ctx(t), "O-1", 2)
	if err != nil || lower.Version != 5 {
		t.Fatalf("a fence below the version: v%d, %v; want v5 unchanged", lower.Version, err)
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	rows := outboxRows(t, db, "O-1")
	if len(rows) != 2 || rows[1].EventType != "OrderCheckedOut" || rows[1].AggregateVersion != 6 {
		t.Fatalf("outbox after the checkout %+v; want OrderCheckedOut at version 6", rows)
	}
	if _, err := orders(repo).FenceVersion(ctx(t), "O-missing", 5); !errors.Is(err, order.ErrNotFound) {
		t.Fatalf("fence of an unknown order: %v, want ErrNotFound", err)
	}
	var rule *rules.RuleError
	if _, err := orders(repo).FenceVersion(ctx(t), "O-1", 0); !errors.As(err, &rule) {
		t.Fatalf("fence at 0: %v, want a rule error", err)
	}
}
