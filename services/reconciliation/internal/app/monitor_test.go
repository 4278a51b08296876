package app_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// TestMonitorMeasuresConvergenceAndCountsOrdersPastTheDeadline follows two
// paid orders: one every service catches up with (its convergence is
// measured once, from the payment to the last effect: 1.2 s), one whose
// inventory does only past the deadline (counted past it, with its age,
// until then; measured once it catches up). The histogram is checked for
// the durations it recorded, their sum and the buckets they fell in, not
// only for how many.
func TestMonitorMeasuresConvergenceAndCountsOrdersPastTheDeadline(t *testing.T) {
	changed := time.Now().Add(-10 * time.Second).Truncate(time.Millisecond)
	ok := paidButLost("O-ok")
	ok.Order.UpdatedAt = changed
	ok.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}, UpdatedAt: changed.Add(300 * time.Millisecond)}
	ok.Notifications.Sent[0].CreatedAt = changed.Add(1200 * time.Millisecond)
	lost := paidButLost("O-lost")
	lost.Order.UpdatedAt = changed
	svc := newServices(ok, lost)

	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r, store, reg := newReconcilerAt(t, svc, 30*time.Second, clock)
	m := app.NewMonitor(app.MonitorConfig{Interval: time.Second, MaxOrders: 100, MaxChecks: 100}, r, store)
	ctx := context.Background()

	for range 2 {
		if err := m.Look(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := sample(t, reg, "order_convergence_seconds", nil); n != 1 {
		t.Fatalf("%v convergences measured, want 1 (O-ok, once)", n)
	}
	checkConvergences(t, reg, 1200*time.Millisecond)
	// Within the deadline nothing is past it.
	if v := sample(t, reg, "orders_unconverged", nil); v != 0 {
		t.Fatalf("orders_unconverged = %v before the deadline", v)
	}

	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if err := m.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if v := sample(t, reg, "orders_unconverged", nil); v != 1 {
		t.Fatalf("orders_unconverged = %v, want 1 (O-lost)", v)
	}
	if age := sample(t, reg, "orders_unconverged_oldest_age_seconds", nil); age < 60 || age > 80 {
		t.Fatalf("oldest age %v s, want about 70", age)
	}

	// The lost effect comes back: the order converges and leaves the count.
	svc.mu.Lock()
	f := svc.facts["O-lost"]
	f.Inventory = rec.Inventory{Status: rec.InventoryDeducted, Items: []rec.Line{{SKU: "S", Quantity: 1}}, UpdatedAt: now}
	svc.facts["O-lost"] = f
	svc.mu.Unlock()
	if err := m.Look(ctx); err != nil {
		t.Fatal(err)
	}
	if v := sample(t, reg, "orders_unconverged", nil); v != 0 {
		t.Fatalf("orders_unconverged = %v after the effect came back", v)
	}
	if n := sample(t, reg, "order_convergence_seconds", nil); n != 2 {
		t.Fatalf("%v convergences measured, want 2", n)
	}
	checkConvergences(t, reg, 1200*time.Millisecond, now.Sub(changed))
}

// checkConvergences checks that order_convergence_seconds recorded exactly
// the durations want: their sum, and in each bucket as many as are at most
// its bound.
func checkConvergences(t *testing.T, reg *prometheus.Registry, want ...time.Duration) {
	t.Helper()
	h := histogram(t, reg, "order_convergence_seconds")
	sum := 0.0
	for _, d := range want {
		sum += d.Seconds()
	}
	if h.GetSampleCount() != uint64(len(want)) || math.Abs(h.GetSampleSum()-sum) > 1e-6 {
		t.Fatalf("histogram holds %d convergences of %.6f s in all, want %d of %.6f s (%v)",
			h.GetSampleCount(), h.GetSampleSum(), len(want), sum, want)
	}
	for _, b := range h.GetBucket() {
		n := uint64(0)
		for _, d := range want {
			if d.Seconds() <= b.GetUpperBound() {
				n++
			}
		}
		if b.GetCumulativeCount() != n {
			t.Fatalf("histogram bucket le=%v holds %d convergences, want %d of %v", b.GetUpperBound(), b.GetCumulativeCount(), n, want)
		}
	}
}

// histogram returns the histogram called name in reg.
func histogram(t *testing.T, reg *prometheus.Registry, name string) *dto.Histogram {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 && f.GetMetric()[0].Histogram != nil {
			return f.GetMetric()[0].GetHistogram()
		}
	}
	t.Fatalf("no histogram %s", name)
	return nil
}

// followedOrder is a paid order every service caught up with, changed at
// changed, its last effect 200 ms later; pendingSince, if not zero, leaves
// its OrderPaid message pending in the outbox since then (delivered, not yet
// marked sent).
func followedOrder(id string, changed, pendingSince time.Time) rec.Facts {
	f := converged(id)
	f.Order.UpdatedAt = changed
	f.Inventory.UpdatedAt = changed.Add(100 * time.Millisecond)
	f.Notifications.Sent[0].CreatedAt = changed.Add(200 * time.Millisecond)
	if !pendingSince.IsZero() {
		f.Order.Events[1].Status, f.Order.Events[1].CreatedAt = "PENDING", pendingSince
	}
	return f
}

// TestMonitorReadsEachChangeOnce: a look reads the changes after the
// cursor it saved, a page at a time, up to commitMargin (1 s) before now,
// and measures each convergence once; the next look reads only what
// changed since. The orders it just followed are not read again to be
// checked. An order whose message has been pending for exactly the
// deadline has converged; one pending a microsecond longer is stuck.
func TestMonitorReadsEachChangeOnce(t *testing.T) {
	const deadline = 30 * time.Second
	now := time.Now().Truncate(time.Millisecond)
	clock := &fixedClock{now: now}
	changed := now.Add(-10 * time.Second)
	var facts []rec.Facts
	for i := range 5 {
		facts = append(facts, followedOrder(fmt.Sprintf("O-%d", i), changed.Add(time.Duration(i)*time.Millisecond), time.Time{}))
	}
	facts = append(facts,
		followedOrder("O-5", changed.Add(5*time.Millisecond), now.Add(-deadline)),
		followedOrder("O-stuck", changed.Add(6*time.Millisecond), now.Add(-deadline-time.Microsecond)),
		// Within the commit margin: left for a later look.
		followedOrder("O-late", now.Add(-time.Second+time.Millisecond), time.Time{}))
	svc := newServices(facts...)
	r, store, reg := newReconcilerAt(t, svc, deadline, clock.Now)
	m := app.NewMonitor(app.MonitorConfig{Interval: time.Second, MaxOrders: 100, MaxChecks: 100}, r, store)
	ctx := context.Background()

	look := func(wantCursor string, wantChangedReads, wantOrderReads int, wantConvergences int) {
		t.Helper()
		changedBefore, ordersBefore := svc.readsOf("changed"), svc.readsOf("orders")
		if err := m.Look(ctx); err != nil {
			t.Fatal(err)
		}
		cursor, err := store.Cursor(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cursor.AfterID != wantCursor {
			t.Fatalf("cursor after the look at %s, want at %s", cursor.AfterID, wantCursor)
		}
		if n := svc.readsOf("changed") - changedBefore; n != wantChangedReads {
			t.Fatalf("the look read %d pages of changes, want %d", n, wantChangedReads)
		}
		if n := svc.readsOf("orders") - ordersBefore; n != wantOrderReads {
			t.Fatalf("the look read orders %d times to check them, want %d", n, wantOrderReads)
		}
		want := make([]time.Duration, wantConvergences)
		for i := range want {
			want[i] = 200 * time.Millisecond
		}
		checkConvergences(t, reg, want...)
	}
	// Seven changes in pages of 2, O-late within the margin: 4 pages; every
	// order checked was just followed; O-0…O-5 converged, O-stuck did not.
	look("O-stuck", 4, 0, 6)
	// Nothing changed since: one page read, and O-stuck, not followed this
	// time, read again to be checked; nothing measured twice.
	look("O-stuck", 1, 1, 6)
	// A second later O-late is past the margin.
	clock.Set(now.Add(time.Second))
	look("O-late", 1, 1, 7)
}

// TestMonitorFollowsAtMostMaxOrdersALook: a look follows up to MaxOrders
// changed orders and leaves the rest to the next look.
func TestMonitorFollowsAtMostMaxOrdersALook(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	changed := now.Add(-10 * time.Second)
	var facts []rec.Facts
	for i := range 5 {
		facts = append(facts, followedOrder(fmt.Sprintf("O-%d", i), changed.Add(time.Duration(i)*time.Millisecond), time.Time{}))
	}
	svc := newServices(facts...)
	r, store, _ := newReconcilerAt(t, svc, 30*time.Second, func() time.Time { return now })
	m := app.NewMonitor(app.MonitorConfig{Interval: time.Second, MaxOrders: 2, MaxChecks: 100}, r, store)
	for _, want := range []string{"O-1", "O-3", "O-4"} {
		if err := m.Look(context.Background()); err != nil {
			t.Fatal(err)
		}
		cursor, err := store.Cursor(context.Background())
		if err != nil || cursor.AfterID != want {
			t.Fatalf("cursor at %q (%v), want at %s", cursor.AfterID, err, want)
		}
	}
}

// TestMonitorMeasuresOnlyOrdersThatAskedForEffects: a payment that reached
// a cancelled order and was returned asks the payment and notification
// services for effects, and its convergence is measured (from the change
// to the notification, 300 ms); an order cancelled before it was paid asks
// nothing of anyone, and has no convergence to measure.
func TestMonitorMeasuresOnlyOrdersThatAskedForEffects(t *testing.T) {
	now := time.Now().Truncate(time.Millisecond)
	changed := now.Add(-10 * time.Second)
	returned := rec.Facts{
		Order: rec.Order{ID: "O-returned", Found: true, Status: rec.StatusCancelled, Version: 5, Amount: dec("10"), Currency: "CNY",
			Items: []rec.OrderLine{{Line: rec.Line{SKU: "S", Quantity: 1}, UnitPrice: dec("10")}}, UpdatedAt: changed, RefundedAmount: decimal.Zero,
			Events: []rec.OutboxRow{sent("E-1", "OrderCreated", 1), sent("E-3", "OrderCancelled", 3), sent("E-4", "OrderPaymentRejected", 4),
				sent("E-5", "OrderPaymentReturned", 5)},
			Refunds: []rec.Refund{{ID: rules.ReturnRefundID("P-1"), Kind: rec.KindPaymentReturn, PaymentID: "P-1", Amount: dec("10"),
				Currency: "CNY", Status: rec.RefundSucceeded, Reason: "ORDER_CANCELLED"}}},
		Payment: rec.Payment{Found: true, PaymentID: "P-1", Amount: dec("10"), Currency: "CNY", Status: rec.PaymentRefunded, Refunded: dec("10"),
			UpdatedAt: changed.Add(100 * time.Millisecond),
			Refunds:   []rec.PaymentRefund{{ID: rules.ReturnRefundID("P-1"), Amount: dec("10"), Status: "SUCCEEDED", CreatedAt: changed.Add(100 * time.Millisecond)}}},
		Inventory:     rec.Inventory{Status: rec.InventoryNone},
		Notifications: rec.Notifications{Sent: []rec.Notice{{EventID: "E-5", Kind: "PAYMENT_RETURNED", CreatedAt: changed.Add(300 * time.Millisecond)}}},
	}
	unpaid := rec.Facts{
		Order: rec.Order{ID: "O-unpaid", Found: true, Status: rec.StatusCancelled, Version: 2, Amount: dec("10"), Currency: "CNY",
			Items: []rec.OrderLine{{Line: rec.Line{SKU: "S", Quantity: 1}, UnitPrice: dec("10")}}, UpdatedAt: changed.Add(time.Millisecond),
			Events: []rec.OutboxRow{sent("E-6", "OrderCreated", 1), sent("E-7", "OrderCancelled", 2)}},
		Inventory: rec.Inventory{Status: rec.InventoryNone},
	}
	for _, f := range []rec.Facts{returned, unpaid} {
		if fs := rec.Compare(f, now.Add(-30*time.Second)); len(fs) != 0 {
			t.Fatalf("%s is not converged: %+v", f.Order.ID, fs)
		}
	}
	svc := newServices(returned, unpaid)
	r, store, reg := newReconcilerAt(t, svc, 30*time.Second, func() time.Time { return now })
	m := app.NewMonitor(app.MonitorConfig{Interval: time.Second, MaxOrders: 100, MaxChecks: 100}, r, store)
	if err := m.Look(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkConvergences(t, reg, 300*time.Millisecond)
}
