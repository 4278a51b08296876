package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/app/apptest"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

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
	store := apptest.NewStore(nil)
	orders := app.NewOrders(store, nil)
	ctx := context.Background()
	if _, err := orders.Create(ctx, newOrder(t, "O-1", "C-1")); err != nil {
		t.Fatal(err)
	}
	if got := store.Emitted("O-1"); len(got) != 1 || got[0].Type != order.EventCreated {
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
			if n := len(store.Emitted("O-1")); n != 2 {
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
			store := apptest.NewStore(nil)
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
	store := apptest.NewStore(nil)
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
