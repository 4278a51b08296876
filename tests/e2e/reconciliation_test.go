package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// The convergence deadline, measured and alerted: a paid order's
// convergence is observed once; an order a consumer lost (its database
// restored from a backup older than the payment) is counted past the
// deadline (3 s here) until reconciliation republishes its events; the
// snapshot says converged and how many findings reconciliation recorded.
func TestConvergenceDeadlineIsMeasuredAndReconciled(t *testing.T) {
	t.Parallel()
	s := harness.Start(t, harness.Options{})
	s.SetStock("SKU-D", 10)
	placePaidOrder(t, s, "O-D1", "SKU-D")
	s.WaitUntil(30*time.Second, "O-D1 converged and measured", func() bool {
		return s.Converged("O-D1") && s.Metric("reconciliation", "order_convergence_seconds", nil) >= 1
	})
	if n := s.Metric("reconciliation", "orders_unconverged", nil); n != 0 {
		t.Fatalf("orders_unconverged %v with every order converged", n)
	}

	var ids []string
	for _, e := range s.JSON("order", "GET", "/orders/O-D1/events", nil, 200)["events"].([]any) {
		ids = append(ids, e.(map[string]any)["eventId"].(string))
	}
	if err := drill.RestoreBackup(t.Context(), s.DatabaseURL("inventory"), "inventory", "O-D1", ids); err != nil {
		t.Fatal(err)
	}
	if s.Converged("O-D1") {
		t.Fatal("O-D1 converged after inventory lost its payment")
	}
	// The monitor follows each change of an order until it converges; an
	// effect lost afterwards changes no order, so reconciliation runs find
	// it (below). The deadline's gauges are shown by a second order paid
	// while inventory is away.
	s.Stop("inventory")
	placeOrderPaidWithoutWaiting(t, s, "O-D2", "SKU-D")
	s.WaitUntil(30*time.Second, "O-D2 past the deadline", func() bool {
		return s.Metric("reconciliation", "orders_unconverged", nil) == 1 &&
			s.Metric("reconciliation", "orders_unconverged_oldest_age_seconds", nil) >= 3
	})
	s.Restart("inventory", nil)
	s.WaitUntil(30*time.Second, "O-D2 converged once inventory is back", func() bool {
		return s.Converged("O-D2") && s.Metric("reconciliation", "orders_unconverged", nil) == 0
	})

	run := s.Reconcile("O-D1", "O-D2")
	if got := suiteapi.Kinds(run); !slices.Equal(got, []string{"MISSING_EFFECT inventory REPUBLISH"}) || run.Actions != 1 {
		t.Fatalf("run %+v, want one MISSING_EFFECT of O-D1 compensated", run)
	}
	s.WaitUntil(30*time.Second, "both orders converged", func() bool {
		return s.Converged("O-D1") && s.Converged("O-D2") && s.Metric("reconciliation", "orders_unconverged", nil) == 0
	})
	if st := s.Inventory("SKU-D"); st.Available != 6 || st.Deducted != 4 {
		t.Fatalf("stock %+v, want two orders of 2 deducted once each", st)
	}
	snap := s.JSON("order", "GET", "/orders/O-D1/snapshot", nil, 200)
	if snap["converged"] != true || snap["findings"] != 1.0 {
		t.Fatalf("snapshot %v, want converged and the one finding", snap)
	}
	again := s.Reconcile("O-D1", "O-D2")
	if len(again.Findings) != 0 || again.Actions != 0 {
		t.Fatalf("a run after the fix: %+v", again)
	}
	findings := s.JSON("reconciliation", "GET", "/admin/reconciliation/findings?orderId=O-D1", nil, 200)
	f := findings["findings"].([]any)[0].(map[string]any)
	if findings["count"] != 1.0 || !strings.HasPrefix(f["outcome"].(string), "DONE") || f["expected"] == "" || f["actual"] == "" {
		t.Fatalf("audit of O-D1: %v", findings)
	}
}

// placeOrderPaidWithoutWaiting creates, checks out and pays an order of two
// units of sku at 40.00 and returns at once.
func placeOrderPaidWithoutWaiting(t *testing.T, s *harness.Suite, orderID, sku string) {
	t.Helper()
	amount := s.CreateOrder(harness.Order{ID: orderID, Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: sku, Quantity: 2, UnitPrice: "40.00"}}})
	if code, out := s.Pay(orderID, amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
}
