package app_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

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
