package bench_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// reconcileLost is the share of orders whose inventory effect the
// reconciliation benchmark loses (a restored backup), so its first run has
// work to do and its second run has the same facts to find again.
const reconcileLost = 100

// startPaid starts a suite with make run's settings (a 30 s convergence
// deadline, runs only on request) and pays n orders through the API at rate
// a second, waiting until every one has converged.
func startPaid(b *testing.B, n, rate int) (*harness.Suite, *generator) {
	b.Helper()
	s := harness.Start(b, harness.Options{Partitions: 64, Env: suiteEnv(b)})
	for k := range apiSKUs {
		s.SetStock(benchSKU(k), apiStock)
	}
	w := newConvergence(convergenceDBs(b, s))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })
	b.Cleanup(func() { cancel(); wg.Wait() })
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	b.Cleanup(client.CloseIdleConnections)
	gen := &generator{client: client, orderURL: s.URL("order"), paymentURL: s.URL("payment"), watch: w}
	r := gen.run(ctx, "O-bench-0-", n, rate)
	if r.failed > 0 || r.shed > 0 || !w.waitAll(ctx, convergeTimeout) {
		b.Fatalf("%d of %d orders failed, %d shed, %d not converged; first error: %v", r.failed, n, r.shed, w.pendingCount(), gen.firstError())
	}
	b.Logf("%d orders paid in %v (%.0f/s), every one converged", r.accepted, r.took.Round(time.Millisecond), float64(r.accepted)/r.took.Seconds())
	return s, gen
}

// benchRun is a reconciliation run as the benchmarks read it, with how
// long it took from its start to its end as the client saw it.
type benchRun struct {
	harness.Run
	took time.Duration
}

// reconcileAll runs reconciliation over every order whatever its age and
// waits for it to end, as make reconcile does: the run is the service's,
// not the request's, so no HTTP timeout bounds it.
func reconcileAll(b *testing.B, s *harness.Suite) benchRun {
	b.Helper()
	start := time.Now()
	r := s.Reconcile()
	return benchRun{Run: r, took: time.Since(start)}
}

// BenchmarkReconciliation reconciles every order of a suite that holds
// BENCH_RECONCILE_ORDERS (10 000) paid orders, 100 of which lost their
// inventory effect (a restored backup): the first run checks them all,
// finds the 100 and republishes their events; the order service's relay is
// held, so a second run right after finds the same facts and must take no
// action. It prints the orders checked per second of each run
// (checked/s, second-checked/s), the findings and the actions of each.
func BenchmarkReconciliation(b *testing.B) {
	set := loadSettings(b)
	s, _ := startPaid(b, set.ReconcileOrders, set.ReconcileRate)
	var lost []string
	for i := 0; len(lost) < reconcileLost && i < set.ReconcileOrders; i += max(set.ReconcileOrders/reconcileLost, 1) {
		lost = append(lost, "O-bench-0-"+leftPad(i))
	}
	for _, id := range lost {
		var ids []string
		if err := s.DB("order").Select(&ids, `SELECT event_id FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, id); err != nil {
			b.Fatal(err)
		}
		if err := drill.RestoreBackup(context.Background(), s.DatabaseURL("inventory"), "inventory", id, ids); err != nil {
			b.Fatal(err)
		}
	}
	s.ArmFailPoint("order", outbox.FailPointBeforePublish, "error", 0)

	var first, second benchRun
	b.ResetTimer()
	for range b.N {
		first = reconcileAll(b, s)
		second = reconcileAll(b, s)
	}
	b.StopTimer()
	// The first run republished the lost events: the held relay met them.
	s.WaitFailPointFired("order", outbox.FailPointBeforePublish, 1, 10*time.Second)
	s.ArmFailPoint("order", outbox.FailPointBeforePublish, "off", 0)
	if first.Checked < set.ReconcileOrders || len(first.Findings) != len(lost) || second.Actions != 0 || len(second.Findings) != len(lost) {
		b.Fatalf("first run checked %d, %d findings, %d actions; second run %d findings, %d actions; want %d checked, %d findings and actions, then the same findings and no action",
			first.Checked, len(first.Findings), first.Actions, len(second.Findings), second.Actions, set.ReconcileOrders, len(lost))
	}
	for _, f := range second.Findings {
		if !strings.HasPrefix(f.Outcome, "ALREADY_TAKEN") {
			b.Fatalf("second run: %s %s, want ALREADY_TAKEN", f.Kind, f.Outcome)
		}
	}
	s.WaitUntil(2*time.Minute, "the lost effects republished and applied", func() bool {
		return len(reconcileAll(b, s).Findings) == 0
	})
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(first.Checked), "orders")
	b.ReportMetric(float64(first.Checked)/first.took.Seconds(), "checked/s")
	b.ReportMetric(float64(second.Checked)/second.took.Seconds(), "second-checked/s")
	b.ReportMetric(float64(len(first.Findings)), "findings")
	b.ReportMetric(float64(first.Actions), "actions")
	b.ReportMetric(float64(second.Actions), "second-actions")
	b.Logf("run 1: %d orders in %v, %d findings, %d actions; run 2: %d orders in %v, %d findings, %d actions (ALREADY_TAKEN)",
		first.Checked, first.took.Round(time.Millisecond), len(first.Findings), first.Actions,
		second.Checked, second.took.Round(time.Millisecond), len(second.Findings), second.Actions)
}

func leftPad(i int) string {
	s := strconv.Itoa(i)
	return strings.Repeat("0", 6-len(s)) + s
}

// BenchmarkConvergenceDeadline measures the tutorial's quantified questions
// about convergence with make run's settings (deadline 30 s, a convergence
// check every 5 s): how long a paid order takes to converge at a steady
// BENCH_CONVERGENCE_RATE (50 orders/s, BENCH_CONVERGENCE_ORDERS of them),
// from the order's change to the last service's effect as the monitor
// records it (conv-p50-ms, conv-p99-ms); then, inventory stopped while as
// many orders are paid, how long after the first of them orders_unconverged
// reports them (detect-s: the deadline plus the check), and, once inventory
// is back, how long until every effect is applied (drained-s, the backlog
// clearing) and until the gauge is 0 again (clear-s, which adds the
// monitor's check interval).
func BenchmarkConvergenceDeadline(b *testing.B) {
	set := loadSettings(b)
	s, gen := startPaid(b, set.ConvergenceOrders, set.ConvergenceRate)
	rec := s.DB("reconciliation")
	s.WaitUntil(time.Minute, "every order's convergence recorded", func() bool {
		var done int
		return rec.Get(&done, `SELECT count(*) FROM convergence_watch WHERE order_id LIKE 'O-bench-0-%' AND converged_at IS NOT NULL`) == nil &&
			done == set.ConvergenceOrders
	})
	var st struct {
		P50 float64 `db:"p50"`
		P99 float64 `db:"p99"`
		N   int     `db:"n"`
	}
	if err := rec.Get(&st, `
		SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM converged_at - changed_at))::float8 AS p50,
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM converged_at - changed_at))::float8 AS p99,
		       count(*) AS n
		FROM convergence_watch WHERE order_id LIKE 'O-bench-0-%'`); err != nil {
		b.Fatal(err)
	}

	var detect, drained, cleared time.Duration
	b.ResetTimer()
	for round := range b.N {
		s.Stop("inventory")
		start := time.Now()
		r := gen.run(context.Background(), "O-bench-"+strconv.Itoa(round+1)+"-", set.ConvergenceOrders, set.ConvergenceRate)
		if r.failed > 0 || r.shed > 0 {
			b.Fatalf("%d payments failed and %d were shed while inventory was away: %v", r.failed, r.shed, gen.firstError())
		}
		s.WaitUntil(2*time.Minute, "orders_unconverged reports the orders past the deadline", func() bool {
			return s.Metric("reconciliation", "orders_unconverged", nil) > 0
		})
		detect = time.Since(start)
		s.Restart("inventory", nil)
		back := time.Now()
		if !gen.watch.waitAll(context.Background(), convergeTimeout) {
			b.Fatalf("%d orders not converged %v after inventory came back", gen.watch.pendingCount(), convergeTimeout)
		}
		drained = time.Since(back)
		prefix := "O-bench-" + strconv.Itoa(round+1) + "-%"
		s.WaitUntil(5*time.Minute, "every order converged once inventory is back", func() bool {
			var done int
			return s.Metric("reconciliation", "orders_unconverged", nil) == 0 &&
				rec.Get(&done, `SELECT count(*) FROM convergence_watch WHERE order_id LIKE $1 AND converged_at IS NOT NULL`, prefix) == nil &&
				done == set.ConvergenceOrders
		})
		cleared = time.Since(back)
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(st.P50*1000, "conv-p50-ms")
	b.ReportMetric(st.P99*1000, "conv-p99-ms")
	b.ReportMetric(detect.Seconds(), "detect-s")
	b.ReportMetric(drained.Seconds(), "drained-s")
	b.ReportMetric(cleared.Seconds(), "clear-s")
	b.Logf("%d orders at %d/s: change → last effect p50 %.0f ms, p99 %.0f ms; %d orders paid with inventory away: reported past the deadline %v after the first; once inventory came back, every effect applied after %v and orders_unconverged back to 0 after %v",
		st.N, set.ConvergenceRate, st.P50*1000, st.P99*1000, set.ConvergenceOrders, detect.Round(time.Millisecond),
		drained.Round(time.Millisecond), cleared.Round(time.Millisecond))
}
