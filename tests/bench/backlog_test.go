package bench_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// BenchmarkBacklog is the backlog drill of `make drill-backlog` on a fresh
// suite (64 partitions, the services' defaults) for each instance count:
// BENCH_BACKLOG_EVENTS OrderPaid events (100 000) published at once,
// inventory, points and notification left at one process each
// (instances=1, what the drain target is set for) or scaled from one to
// six five seconds in (instances=6, what the drill exercises), every
// event checked applied exactly once. It prints the time from the first
// publish to the drain (drain-s), the events per second that makes
// (events/s), the publish's own time (publish-s), and the highest resident
// memory of any consumer process (peak-rss-MiB), and each service's
// (inventory-peak-rss-MiB …). The drill's table is printed whole, before
// the results: a benchmark's log keeps only its first ten lines.
func BenchmarkBacklog(b *testing.B) {
	for _, instances := range []int{1, backlog.DefaultInstances} {
		b.Run(fmt.Sprintf("instances=%d", instances), func(b *testing.B) { benchmarkBacklog(b, instances) })
	}
}

func benchmarkBacklog(b *testing.B, instances int) {
	set := loadSettings(b)
	s := harness.Start(b, harness.Options{Partitions: 64, Env: suiteEnv(b)})
	b.ResetTimer()
	for i := range b.N {
		cfg := backlog.Config{
			RunID: fmt.Sprintf("bench%d-%d", i, time.Now().Unix()), Count: set.BacklogEvents, SKUs: 100,
			Instances: instances, ScaleAfter: 5 * time.Second, Interval: time.Second,
			Timeout: 20 * time.Minute, Out: b.TempDir(),
		}
		var table strings.Builder
		rep, err := backlog.Run(context.Background(), cfg, s.BacklogTarget(), backlog.Output{Table: &table, Progress: io.Discard})
		fmt.Printf("%s's drill:\n%s\n", b.Name(), table.String())
		if err != nil {
			b.Fatalf("backlog drill: %v", err)
		}
		if !rep.Pass || rep.Drained == nil {
			b.Fatalf("the backlog drill failed: see the table above")
		}
		var rss float64
		for _, g := range rep.Groups {
			rss = max(rss, g.PeakRSS)
			b.ReportMetric(g.PeakRSS/(1<<20), g.Service+"-peak-rss-MiB")
			fmt.Printf("%s: %s's peak RSS %.1f MiB, %s at %.0f s\n", b.Name(), g.Service, g.PeakRSS/(1<<20), g.PeakRSSInstance, g.PeakRSSAt)
		}
		b.ReportMetric(*rep.Drained, "drain-s")
		b.ReportMetric(float64(cfg.Count) / *rep.Drained, "events/s")
		if rep.PublishSeconds != nil {
			b.ReportMetric(*rep.PublishSeconds, "publish-s")
		}
		b.ReportMetric(rss/(1<<20), "peak-rss-MiB")
	}
}
