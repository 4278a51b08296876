package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/prometheus/procfs"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/tests/bench"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// How the API benchmark detects convergence (docs/benchmarks.md): one
// poller per database (order, inventory, points, notification) asks every
// convergePollEvery which of the orders it still waits for have their
// effect committed there, with one query over those order ids (a few
// dozen at 200 orders/s) that reads the table's index, never the whole
// table (convergenceDBs). An effect is stamped with the time its
// poll started, so a latency is late by at most convergePollEvery (half of
// it on average) and never early; the pollers add four small queries per
// interval to Postgres and nothing to the services. Polling the order
// service's snapshot endpoint instead would cost eight HTTP calls between
// the services per look, which at this rate distorts what it measures.
const (
	convergePollEvery = 10 * time.Millisecond
	// convergeTimeout is how long after the last payment the benchmark
	// waits for the stragglers; an order still not converged then counts
	// as an error.
	convergeTimeout = time.Minute
	// apiMaxInFlight bounds the orders being walked at once; when it is
	// reached the generator falls behind its rate, which the achieved rate
	// shows.
	apiMaxInFlight = 1024
	apiSKUs        = 100
	apiStock       = 1_000_000
	apiUnitPrice   = "25.00"
	apiCurrency    = "CNY"
	// apiProfileAfter is how far into a step BENCH_PROFILE_DIR's CPU
	// profiles start: past the generator's first second.
	apiProfileAfter = 2 * time.Second
)

// suiteEnv is the services' environment in a benchmark: suiteDefaults,
// then BENCH_SERVICE_ENV's settings over it.
func suiteEnv(b *testing.B) map[string]string {
	b.Helper()
	env := suiteDefaults()
	set := loadSettings(b)
	if set.ProfileDir != "" {
		env["PPROF_ENABLED"] = "true"
	}
	maps.Copy(env, set.ServiceEnv)
	return env
}

// suiteDefaults undoes the harness's test tunings (debug logs, 20 ms relay
// polls, short retries, a convergence check five times a second): an empty
// value makes each service use its documented default, as `make run` does.
func suiteDefaults() map[string]string {
	return map[string]string{
		"LOG_LEVEL":                  "",
		"OUTBOX_POLL_INTERVAL":       "",
		"OUTBOX_BACKOFF_INITIAL":     "",
		"OUTBOX_BACKOFF_MAX":         "",
		"RETRY_INITIAL_INTERVAL":     "",
		"RETRY_MAX_INTERVAL":         "",
		"CONVERGENCE_DEADLINE":       "",
		"CONVERGENCE_CHECK_INTERVAL": "",
	}
}

// BenchmarkAPIPayToConverged drives orders through a running suite's HTTP
// API (create, checkout, pay) at a steady rate, open loop, and prints the
// latency of the accepted orders from sending the payment until
// inventory, points and notification have all applied the order's
// OrderPaid (p50-ms, p99-ms, max-ms), the part of it until the order is
// PAID (paid-p50-ms), the achieved rate (orders/s), the accepted and shed
// orders (a step answered 503, not retried: accepted, shed, and the
// latency of the 503 answers, shed-p99-ms), the orders paid but not
// converged within convergeTimeout of the last payment (half-done, must be
// 0) and the failed walks (errors). With BENCH_API_RATES it sweeps the
// rates in one run against one suite and prints a table of them; its
// metrics are then the goodput curve: each rate's accepted/s, accepted
// and shed share, pay → converged p50 and p99, shed p50 and p99 and
// errors, the rate in the unit (rate-200-p99-ms), the knee
// (knee-orders/s, see bench.Goodput) and the goodput at twice the knee and the lowest past
// it, each ÷ the knee's (goodput-at-2x-knee-ratio,
// goodput-past-knee-min-ratio), reported only when such a rate was
// swept.
func BenchmarkAPIPayToConverged(b *testing.B) {
	set := loadSettings(b)
	rates := set.APIRates
	if len(rates) == 0 {
		rates = []int{set.APIRate}
	}
	s := harness.Start(b, harness.Options{Partitions: 64, Env: suiteEnv(b)})
	for k := range apiSKUs {
		s.SetStock(benchSKU(k), apiStock)
	}
	dbs := convergenceDBs(b, s)
	backlog := &outboxPeaks{dbs: map[string]*sqlx.DB{"payment": s.DB("payment"), "order": s.DB("order")}, peak: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		backlog.run(ctx)
	}()
	b.Cleanup(func() {
		cancel()
		<-watched
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	b.Cleanup(client.CloseIdleConnections)
	gen := generator{client: client, orderURL: s.URL("order"), paymentURL: s.URL("payment")}

	steps := make([]stepResult, len(rates))
	b.ResetTimer()
	for round := range b.N {
		for i, rate := range rates {
			steps[i].add(runStep(ctx, b, s, &gen, dbs, round, rate, set.APIOrders, set.ProfileDir))
		}
	}
	b.StopTimer()
	var total stepResult
	for i := range steps {
		steps[i].sort()
		total.add(steps[i])
	}
	total.sort()
	if len(total.converged) == 0 {
		b.Fatalf("no order converged; %d shed, %d failed, first error: %v", total.shed, total.failed, gen.firstError())
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(total.accepted), "accepted")
	b.ReportMetric(float64(total.shed), "shed")
	b.ReportMetric(float64(total.halfDone), "half-done")
	b.ReportMetric(float64(total.failed), "errors")
	if len(steps) == 1 {
		st := steps[0]
		b.ReportMetric(ms(percentile(st.converged, 50)), "p50-ms")
		b.ReportMetric(ms(percentile(st.converged, 99)), "p99-ms")
		b.ReportMetric(ms(st.converged[len(st.converged)-1]), "max-ms")
		b.ReportMetric(ms(percentile(st.paid, 50)), "paid-p50-ms")
		b.ReportMetric(ms(percentile(st.shedLatency, 99)), "shed-p99-ms")
		b.ReportMetric(st.acceptedRate(), "orders/s")
		for _, name := range harness.Services {
			b.ReportMetric(st.cpuPerOrder(name), name+"-cpu-ms/order")
		}
		if st.host.ok {
			b.ReportMetric(st.perOrder(st.host.postgres), "postgres-cpu-ms/order")
			b.ReportMetric(st.perOrder(st.host.bench), "generator-broker-cpu-ms/order")
			b.ReportMetric(st.perOrder(st.host.busy), "machine-cpu-ms/order")
		}
		b.Logf("%d orders × %d round(s) at %d/s (%.1f/s achieved): %d accepted (%.1f/s), %d shed (create/checkout/pay %d/%d/%d; 503 answered p50 %v p99 %v), %d failed, %d half-done; pay→converged p50 %v p90 %v p99 %v max %v; pay→PAID p50 %v p99 %v; resolution %v, %d failed polls",
			set.APIOrders, b.N, st.rate, st.achieved(), st.accepted, st.acceptedRate(), st.shed,
			st.shedBy[stepCreate], st.shedBy[stepCheckout], st.shedBy[stepPay],
			percentile(st.shedLatency, 50), percentile(st.shedLatency, 99), st.failed, st.halfDone,
			percentile(st.converged, 50), percentile(st.converged, 90), percentile(st.converged, 99), st.converged[len(st.converged)-1],
			percentile(st.paid, 50), percentile(st.paid, 99), convergePollEvery, st.pollErrors)
	} else {
		curve := bench.Goodput(goodputSteps(steps))
		for _, st := range steps {
			reportStep(b, st)
		}
		b.ReportMetric(float64(curve.Knee), "knee-orders/s")
		b.ReportMetric(curve.KneeGoodput, "knee-accepted-orders/s")
		b.ReportMetric(peakAccepted(steps).acceptedRate(), "peak-accepted-orders/s")
		if curve.TwiceKnee > 0 {
			b.ReportMetric(curve.TwiceKneeRatio, "goodput-at-2x-knee-ratio")
		}
		if curve.PastKnee {
			b.ReportMetric(curve.MinPastKneeRatio, "goodput-past-knee-min-ratio")
		}
		if len(total.shedLatency) > 0 {
			b.ReportMetric(ms(percentile(total.shedLatency, 99)), "shed-p99-ms")
		}
		// On stdout: a benchmark's log is cut to its first ten lines
		// unless -v is given, and a sweep's table is the figure. The
		// heading must not start with "Benchmark": in the benchmark
		// format such a line is a result, and benchfmt (so
		// tools/dev/benchtables) reads it as a broken one.
		fmt.Printf("Sweep of BenchmarkAPIPayToConverged, %d orders per rate × %d round(s):\n%s\n", set.APIOrders, b.N, sweepTable(steps, curve))
	}
	for _, name := range []string{"payment", "order"} {
		o := backlog.summary(b, name)
		b.Logf("%s outbox: peak backlog %d pending rows; committed→sent p50 %v p99 %v; %d rows needed more than one attempt (most: %d)",
			name, backlog.get(name), o.P50, o.P99, o.Retried, o.MostAttempts)
	}
	if err := gen.firstError(); err != nil {
		b.Logf("first error: %v", err)
	}
	gen.mu.Lock()
	defer gen.mu.Unlock()
	if gen.firstShed != nil {
		b.Logf("first shed: %v", gen.firstShed)
	}
}

// stepResult is what the orders of one rate did, over every round.
type stepResult struct {
	rate int
	// started orders, and the span from the first start to the last plus
	// one interval: what the generator achieved of the asked rate.
	started   int
	startSpan time.Duration
	// accepted orders were paid; shed ones had a step answered 503;
	// failed ones had another failure.
	accepted, shed int
	failed         int64
	// took is from the first order's start to the last walk's end.
	took time.Duration
	// shedLatency is the time the 503 answers took, sorted.
	shedLatency []time.Duration
	// shedBy counts the shed orders by the step answered 503: which
	// service was at its capacity.
	shedBy map[string]int
	// converged and paid are the accepted orders' pay→converged and
	// pay→PAID latencies, sorted.
	converged, paid []time.Duration
	// halfDone orders were paid but did not converge within
	// convergeTimeout of the last payment.
	halfDone   int
	pollErrors int
	// cpu is the CPU time each service's process spent during the step,
	// in seconds.
	cpu map[string]float64
	// host is the rest of the machine's CPU time during the step.
	host hostCPU
}

func (r *stepResult) add(o stepResult) {
	r.rate = o.rate
	r.started += o.started
	r.startSpan += o.startSpan
	r.accepted += o.accepted
	r.shed += o.shed
	r.failed += o.failed
	r.took += o.took
	r.shedLatency = append(r.shedLatency, o.shedLatency...)
	for step, n := range o.shedBy {
		if r.shedBy == nil {
			r.shedBy = map[string]int{}
		}
		r.shedBy[step] += n
	}
	r.converged = append(r.converged, o.converged...)
	r.paid = append(r.paid, o.paid...)
	r.halfDone += o.halfDone
	r.pollErrors += o.pollErrors
	for name, sec := range o.cpu {
		if r.cpu == nil {
			r.cpu = map[string]float64{}
		}
		r.cpu[name] += sec
	}
	r.host = hostCPU{postgres: r.host.postgres + o.host.postgres, bench: r.host.bench + o.host.bench,
		busy: r.host.busy + o.host.busy, ok: o.host.ok}
}

func (r *stepResult) sort() {
	slices.Sort(r.shedLatency)
	slices.Sort(r.converged)
	slices.Sort(r.paid)
}

// acceptedRate is the accepted orders a second, from the first start to
// the last walk's end: the goodput, what the service kept of the rate
// asked.
func (r stepResult) acceptedRate() float64 {
	if r.took <= 0 {
		return 0
	}
	return float64(r.accepted) / r.took.Seconds()
}

// achieved is the rate the orders were started at.
func (r stepResult) achieved() float64 {
	if r.startSpan <= 0 {
		return 0
	}
	return float64(r.started) / r.startSpan.Seconds()
}

// runStep walks orders at rate under its own order ids and convergence
// watch, then waits for every paid order (the answered ones and any paid
// whose answer was lost) to converge.
func runStep(ctx context.Context, b *testing.B, s *harness.Suite, gen *generator, dbs map[part]*sqlx.DB,
	round, rate, orders int, profileDir string) stepResult {
	b.Helper()
	payments := s.DB("payment")
	cpu0 := serviceCPU(s)
	host0 := readHostCPU()
	if profileDir != "" {
		profiled := profileStep(ctx, s, profileDir, rate)
		defer func() {
			if err := <-profiled; err != nil {
				b.Errorf("profiles at %d/s: %v", rate, err)
			}
		}()
	}
	w := newConvergence(dbs)
	watchCtx, stop := context.WithCancel(ctx)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		w.run(watchCtx)
	}()
	defer func() {
		stop()
		<-watching
	}()
	gen.watch = w
	prefix := fmt.Sprintf("O-bench-%d-%d-", round, rate)
	r := gen.run(ctx, prefix, orders, rate)
	// A payment committed whose answer the client lost (a timeout) left
	// a paid order the walk did not count: it must converge too.
	var paidIDs []string
	if err := payments.SelectContext(ctx, &paidIDs, `SELECT order_id FROM payments WHERE order_id LIKE $1`, prefix+"%"); err != nil {
		b.Fatalf("read the payments of %s*: %v", prefix, err)
	}
	w.expectPaid(paidIDs)
	if !w.waitAll(ctx, convergeTimeout) {
		b.Logf("round %d at %d/s: %d paid orders not converged %v after the last payment", round, rate, w.pendingCount(), convergeTimeout)
	}
	st := w.stats()
	r.converged, r.paid, r.halfDone, r.pollErrors = st.converged, st.paid, st.unconverged, st.pollErrors
	r.cpu = map[string]float64{}
	for name, after := range serviceCPU(s) {
		r.cpu[name] = after - cpu0[name]
	}
	r.host = readHostCPU().since(host0)
	return r
}

// hostCPU is CPU time on this machine, in seconds: the Postgres server's
// processes, this process (the load generator and the in-process
// broker) and the machine's busy time. ok is false where /proc cannot be
// read (not Linux), and then the figures are left out.
type hostCPU struct {
	postgres, bench, busy float64
	ok                    bool
}

// readHostCPU reads the CPU time so far. A Postgres backend that ended
// since the last reading takes its time with it, so the Postgres figure
// of a step is a floor; the suite's services keep their connections, and
// the backends live as long as the step.
func readHostCPU() hostCPU {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return hostCPU{}
	}
	stat, err := fs.Stat()
	if err != nil {
		return hostCPU{}
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return hostCPU{}
	}
	self, err := fs.Self()
	if err != nil {
		return hostCPU{}
	}
	c := stat.CPUTotal
	h := hostCPU{busy: c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, ok: true}
	for _, p := range procs {
		st, err := p.Stat()
		if err != nil {
			continue // ended while being read
		}
		switch {
		case p.PID == self.PID:
			h.bench = st.CPUTime()
		case st.Comm == "postgres":
			h.postgres += st.CPUTime()
		}
	}
	return h
}

// since is the CPU time spent between before and h.
func (h hostCPU) since(before hostCPU) hostCPU {
	if !h.ok || !before.ok {
		return hostCPU{}
	}
	return hostCPU{postgres: h.postgres - before.postgres, bench: h.bench - before.bench, busy: h.busy - before.busy, ok: true}
}

// serviceCPU is the CPU time each service's process has spent since its
// start, in seconds (process_cpu_seconds_total): the difference over a
// step is what serving its orders cost, whatever else ran on the machine.
func serviceCPU(s *harness.Suite) map[string]float64 {
	out := make(map[string]float64, len(harness.Services))
	for _, name := range harness.Services {
		out[name] = s.Metric(name, "process_cpu_seconds_total", nil)
	}
	return out
}

// profileStep keeps a CPU profile of every service over profileSeconds,
// from apiProfileAfter into the step (once the generator runs at its
// rate), as dir/api-<rate>-<service>.pprof. The channel gives the first
// failure, or nil, once every profile is written.
func profileStep(ctx context.Context, s *harness.Suite, dir string, rate int) <-chan error {
	done := make(chan error, 1)
	go func() {
		t := time.NewTimer(apiProfileAfter)
		defer t.Stop()
		select {
		case <-ctx.Done():
			done <- ctx.Err()
			return
		case <-t.C:
		}
		errs := make([]error, len(harness.Services))
		var wg sync.WaitGroup
		for i, name := range harness.Services {
			wg.Go(func() {
				path := fmt.Sprintf("/admin/debug/pprof/profile?seconds=%d", profileSeconds)
				code, raw := s.Call(name, http.MethodGet, path, nil)
				if code != http.StatusOK {
					errs[i] = fmt.Errorf("%s %s: %d %s", name, path, code, raw)
					return
				}
				errs[i] = os.WriteFile(filepath.Join(dir, fmt.Sprintf("api-%d-%s.pprof", rate, name)), raw, 0o644)
			})
		}
		wg.Wait()
		done <- errors.Join(errs...)
	}()
	return done
}

// servicesCPUPerOrder is the CPU time all services together spent per
// accepted order of the step, in milliseconds: the machine's cost of an
// order apart from Postgres and the broker.
func (r stepResult) servicesCPUPerOrder() float64 {
	var all float64
	for _, name := range harness.Services {
		all += r.cpuPerOrder(name)
	}
	return all
}

// perOrder is sec per accepted order of the step, in milliseconds; 0 when
// none was accepted.
func (r stepResult) perOrder(sec float64) float64 {
	if r.accepted == 0 {
		return 0
	}
	return 1000 * sec / float64(r.accepted)
}

// cpuPerOrder is the CPU time service name spent per accepted order of
// the step, in milliseconds; 0 when none was accepted.
func (r stepResult) cpuPerOrder(name string) float64 {
	return r.perOrder(r.cpu[name])
}

// peakAccepted is the swept rate that kept the most accepted orders a
// second.
func peakAccepted(steps []stepResult) stepResult {
	var best stepResult
	for _, st := range steps {
		if st.acceptedRate() > best.acceptedRate() {
			best = st
		}
	}
	return best
}

// goodputSteps are the steps as bench.Goodput reads them. A paid order
// that never converged (half-done) counts in the p99 as slower than any
// that did: leaving it out would let a rate whose orders stall pass as
// fast.
func goodputSteps(steps []stepResult) []bench.Step {
	out := make([]bench.Step, len(steps))
	for i, st := range steps {
		latencies := append(slices.Clone(st.converged), slices.Repeat([]time.Duration{math.MaxInt64}, st.halfDone)...)
		out[i] = bench.Step{Rate: st.rate, Offered: st.started, Accepted: st.accepted,
			Goodput: st.acceptedRate(), P99: percentile(latencies, 99)}
	}
	return out
}

// reportStep reports one offered rate's point of the goodput curve, the
// rate in each unit (rate-200-p99-ms): tools/dev/benchtables draws the
// curve from them, a figure not reported as an empty cell.
func reportStep(b *testing.B, st stepResult) {
	b.Helper()
	unit := func(name string) string { return fmt.Sprintf("rate-%d-%s", st.rate, name) }
	b.ReportMetric(st.acceptedRate(), unit("accepted-orders/s"))
	b.ReportMetric(share(st.accepted, st.started), unit("accepted-%"))
	b.ReportMetric(share(st.shed, st.started), unit("shed-%"))
	// No order, accepted or shed, has no latency, not one of 0.
	if len(st.converged) > 0 {
		b.ReportMetric(ms(percentile(st.converged, 50)), unit("p50-ms"))
		b.ReportMetric(ms(percentile(st.converged, 99)), unit("p99-ms"))
	}
	if len(st.shedLatency) > 0 {
		b.ReportMetric(ms(percentile(st.shedLatency, 50)), unit("shed-p50-ms"))
		b.ReportMetric(ms(percentile(st.shedLatency, 99)), unit("shed-p99-ms"))
	}
	b.ReportMetric(float64(st.failed), unit("errors"))
	b.ReportMetric(st.servicesCPUPerOrder(), unit("services-cpu-ms/order"))
	if st.host.ok {
		b.ReportMetric(st.perOrder(st.host.postgres), unit("postgres-cpu-ms/order"))
		b.ReportMetric(st.perOrder(st.host.busy), unit("machine-cpu-ms/order"))
	}
}

// share is n of all in per cent; 0 of none.
func share(n, all int) float64 {
	if all == 0 {
		return 0
	}
	return 100 * float64(n) / float64(all)
}

// sweepTable is the sweep, one rate a line.
func sweepTable(steps []stepResult, curve bench.Curve) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rate asked\tachieved/s\taccepted\taccepted/s\tshed\t(create/checkout/pay)\terrors\thalf-done\tp50-ms\tp99-ms\tshed-p99-ms\tcpu-ms/order: services\tpostgres\tgenerator+broker\tmachine\t")
	for _, st := range steps {
		fmt.Fprintf(tw, "%d\t%.1f\t%d\t%.1f\t%d\t%d/%d/%d\t%d\t%d\t%.0f\t%.0f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", st.rate, st.achieved(), st.accepted, st.acceptedRate(), st.shed,
			st.shedBy[stepCreate], st.shedBy[stepCheckout], st.shedBy[stepPay],
			st.failed, st.halfDone, ms(percentile(st.converged, 50)), ms(percentile(st.converged, 99)), ms(percentile(st.shedLatency, 99)),
			st.servicesCPUPerOrder(), st.perOrder(st.host.postgres), st.perOrder(st.host.bench), st.perOrder(st.host.busy))
	}
	_ = tw.Flush()
	peak := peakAccepted(steps)
	fmt.Fprintf(&sb, "knee (highest rate with ≥ %.0f %% accepted and accepted p99 ≤ %v): ", 100*bench.KneeAccepted, bench.KneeP99)
	if curve.Knee == 0 {
		sb.WriteString("none")
	} else {
		fmt.Fprintf(&sb, "%d/s asked, %.1f/s accepted there", curve.Knee, curve.KneeGoodput)
	}
	fmt.Fprintf(&sb, "; most accepted: %.1f/s, at %d/s asked", peak.acceptedRate(), peak.rate)
	switch {
	case curve.TwiceKnee > 0:
		fmt.Fprintf(&sb, "; goodput at %d/s (≥ 2 × the knee) ÷ at the knee = %.2f", curve.TwiceKnee, curve.TwiceKneeRatio)
	case curve.Knee > 0:
		fmt.Fprintf(&sb, "; no rate of 2 × the knee (%d/s) or more asked", 2*curve.Knee)
	}
	if curve.PastKnee {
		fmt.Fprintf(&sb, "; lowest goodput past the knee ÷ at the knee = %.2f", curve.MinPastKneeRatio)
	}
	return sb.String()
}

// outboxPeaks samples the pending rows of the payment service's callback
// outbox and the order service's event outbox every outboxSampleEvery and
// keeps the peaks: where a backlog builds up tells which relay limits the
// rate.
type outboxPeaks struct {
	dbs map[string]*sqlx.DB

	mu   sync.Mutex
	peak map[string]int
}

// outboxSampleEvery is coarse: the peaks are a diagnosis, not a figure.
const outboxSampleEvery = 100 * time.Millisecond

func (o *outboxPeaks) run(ctx context.Context) {
	tick := time.NewTicker(outboxSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for name, db := range o.dbs {
			n, err := pendingRows(ctx, db)
			if err != nil {
				continue // a missed sample only lowers a peak
			}
			o.mu.Lock()
			o.peak[name] = max(o.peak[name], n)
			o.mu.Unlock()
		}
	}
}

// pendingRows counts an outbox's pending rows with an index scan: a bitmap
// scan, which the planner picks while the rows just sent are not yet
// vacuumed, would visit each of their heap pages at every sample and load
// the database being measured (docs/decisions.md, Pending rows are read
// with index scans).
func pendingRows(ctx context.Context, db *sqlx.DB) (int, error) {
	var n int
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL enable_bitmapscan = off`); err != nil {
			return err
		}
		return tx.GetContext(ctx, &n, `SELECT count(*) FROM outbox_events WHERE status = 'PENDING'`)
	})
	return n, err
}

// outboxSummary is what one outbox's rows say after the run.
type outboxSummary struct {
	// P50 and P99 are of sent_at − created_at: from the business
	// transaction's start to the relay marking the row sent.
	P50, P99     time.Duration
	Retried      int
	MostAttempts int
}

// summary reads name's outbox after the run.
func (o *outboxPeaks) summary(b *testing.B, name string) outboxSummary {
	b.Helper()
	var r struct {
		P50  float64 `db:"p50"`
		P99  float64 `db:"p99"`
		Rows int     `db:"rows"`
		Most int     `db:"most"`
	}
	if err := o.dbs[name].Get(&r, `
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at)), 0)::float8 AS p50,
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM sent_at - created_at)), 0)::float8 AS p99,
		       count(*) FILTER (WHERE attempts > 1) AS rows,
		       coalesce(max(attempts), 0) AS most
		FROM outbox_events`); err != nil {
		b.Fatalf("summarise the %s outbox: %v", name, err)
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)).Round(time.Millisecond) }
	return outboxSummary{P50: sec(r.P50), P99: sec(r.P99), Retried: r.Rows, MostAttempts: r.Most}
}

func (o *outboxPeaks) get(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.peak[name]
}

func benchSKU(k int) string { return fmt.Sprintf("SKU-bench-%03d", k) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 · n)
	return sorted[max(rank, 1)-1]
}

// generator walks orders through the API at a steady rate.
type generator struct {
	client               *http.Client
	orderURL, paymentURL string
	// watch is the convergence watch of the current step.
	watch *convergence

	mu    sync.Mutex
	first error
	// firstShed is the first 503 answer, which names the service that
	// shed and why.
	firstShed error
}

// The steps of a walk, as errShed names them.
const (
	stepCreate   = "create"
	stepCheckout = "checkout"
	stepPay      = "pay"
)

// errShed is a step answered 503 (OVERLOADED, or the payment service's
// ORDER_SERVICE_UNAVAILABLE when the order service shed its look-up): the
// suite refused the order at admission. An open-loop benchmark counts it
// and does not follow Retry-After, which would raise the load above the
// asked rate (docs/decisions.md, Overload).
type errShed struct {
	step   string
	target string
	// took is the 503 answer's latency.
	took time.Duration
	body string
}

func (e *errShed) Error() string {
	return fmt.Sprintf("post %s: shed after %v: %s", e.target, e.took, e.body)
}

// run starts order i of the round at start + i/rate (open loop: a slow
// answer does not delay the next order), its id prefix + i, and returns
// when every walk ended.
func (g *generator) run(ctx context.Context, prefix string, orders, rate int) stepResult {
	interval := time.Second / time.Duration(rate)
	slots := make(chan struct{}, apiMaxInFlight)
	var wg sync.WaitGroup
	var mu sync.Mutex
	r := stepResult{rate: rate, shedBy: map[string]int{}}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range orders {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return r
			case <-timer.C:
			}
		}
		slots <- struct{}{}
		r.started++
		r.startSpan = time.Since(start) + interval
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			err := g.walk(ctx, fmt.Sprintf("%s%06d", prefix, i), i)
			mu.Lock()
			defer mu.Unlock()
			var shed *errShed
			switch {
			case err == nil:
				r.accepted++
			case errors.As(err, &shed):
				r.shed++
				r.shedBy[shed.step]++
				g.noteShed(shed)
				r.shedLatency = append(r.shedLatency, shed.took)
			default:
				r.failed++
				g.fail(err)
			}
		}()
	}
	wg.Wait()
	r.took = time.Since(start)
	return r
}

func (g *generator) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.first == nil {
		g.first = err
	}
}

func (g *generator) noteShed(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.firstShed == nil {
		g.firstShed = err
	}
}

func (g *generator) firstError() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.first
}

// walk creates, checks out and pays one order; the clock of the order starts
// just before the payment is sent.
func (g *generator) walk(ctx context.Context, id string, i int) error {
	item := map[string]any{"sku": benchSKU(i % apiSKUs), "quantity": 1, "unitPrice": apiUnitPrice}
	if _, err := g.call(ctx, stepCreate, g.orderURL+"/orders", map[string]any{
		"orderId": id, "customerId": fmt.Sprintf("C-bench-%d", i%500), "currency": apiCurrency, "items": []any{item},
	}); err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	if _, err := g.call(ctx, stepCheckout, g.orderURL+"/orders/"+url.PathEscape(id)+"/checkout", nil); err != nil {
		return fmt.Errorf("checkout %s: %w", id, err)
	}
	g.watch.expect(id, time.Now())
	if _, err := g.call(ctx, stepPay, g.paymentURL+"/payments", map[string]any{
		"orderId": id, "amount": apiUnitPrice, "currency": apiCurrency,
	}); err != nil {
		// Whether it was paid after all is read from the payment
		// service's database once the step ends.
		g.watch.forget(id)
		return fmt.Errorf("pay %s: %w", id, err)
	}
	return nil
}

// call posts body as JSON for the walk's step and wants 200 with
// businessCode SUCCESS; a 503 is an *errShed.
func (g *generator) call(ctx context.Context, step, target string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, rd)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", target, err)
	}
	req.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", target, err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable {
		return nil, &errShed{step: step, target: target, took: time.Since(sent), body: string(bytes.TrimSpace(raw))}
	}
	var answer map[string]any
	_ = json.Unmarshal(raw, &answer) // a non-JSON answer fails on its status below
	if resp.StatusCode != http.StatusOK || answer["businessCode"] != "SUCCESS" {
		return nil, fmt.Errorf("post %s: %d %s", target, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return answer, nil
}

// part is one effect of a paid order the benchmark watches for.
type part int

const (
	// partPaid: the order service marked the order PAID (the payment
	// callback arrived); not part of convergence, shown to split the
	// latency in two.
	partPaid part = iota
	partInventory
	partPoints
	partNotification
	nParts
)

// query returns which of the order ids in $1 have the part committed, in
// the part's own database.
func (p part) query() string {
	switch p {
	case partPaid:
		return `SELECT order_id FROM orders WHERE order_id = ANY($1) AND status = 'PAID'`
	case partInventory:
		return `SELECT order_id FROM inventory_orders WHERE order_id = ANY($1) AND status = 'DEDUCTED'`
	case partPoints:
		return `SELECT DISTINCT order_id FROM points_ledger WHERE order_id = ANY($1) AND entry_type = 'EARN'`
	default:
		return `SELECT DISTINCT order_id FROM notifications WHERE order_id = ANY($1) AND kind = 'ORDER_PAID'`
	}
}

// convergence records, per order, when its payment was sent and when each
// part was first seen committed.
type convergence struct {
	dbs map[part]*sqlx.DB

	mu      sync.Mutex
	orders  map[string]*track
	waiting [nParts]map[string]struct{}
	// pollErrors counts failed polls; they only delay a stamp.
	pollErrors int
}

type track struct {
	paySent time.Time
	seen    [nParts]time.Time
}

// convergenceDBs opens each part's database for its poller with
// sequential scans off. Postgres plans the pollers' ANY($1) of a few dozen
// ids over a table of a few thousand rows as a sequential scan, the
// cheaper plan by its costs; but the poll repeats a hundred times a second
// while the table grows with every order, so each poll read every row and
// the observer's share of the server's CPU grew through a sweep (three
// tables read whole at every interval). With the index the cost of a
// poll follows the orders in flight, not the orders so far.
func convergenceDBs(b *testing.B, s *harness.Suite) map[part]*sqlx.DB {
	b.Helper()
	services := map[part]string{partPaid: "order", partInventory: "inventory", partPoints: "points", partNotification: "notification"}
	dbs := make(map[part]*sqlx.DB, len(services))
	for p, service := range services {
		u, err := url.Parse(s.DatabaseURL(service))
		if err != nil {
			b.Fatalf("%s database URL: %v", service, err)
		}
		q := u.Query()
		q.Set("enable_seqscan", "off")
		u.RawQuery = q.Encode()
		db, err := postgres.Open(context.Background(), u.String(), postgres.PoolConfig{MaxOpen: 2})
		if err != nil {
			b.Fatalf("open the %s database for its poller: %v", service, err)
		}
		b.Cleanup(func() { _ = db.Close() })
		dbs[p] = db
	}
	return dbs
}

func newConvergence(dbs map[part]*sqlx.DB) *convergence {
	c := &convergence{dbs: dbs, orders: map[string]*track{}}
	for p := range nParts {
		c.waiting[p] = map[string]struct{}{}
	}
	return c
}

// expect starts watching id, whose payment is sent at paySent.
func (c *convergence) expect(id string, paySent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.orders[id] = &track{paySent: paySent}
	for p := range nParts {
		c.waiting[p][id] = struct{}{}
	}
}

// expectPaid watches the paid orders ids not watched yet, whose payment
// answer the walk did not see: they count for convergence, not latency.
func (c *convergence) expectPaid(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		if _, ok := c.orders[id]; ok {
			continue
		}
		c.orders[id] = &track{}
		for p := range nParts {
			c.waiting[p][id] = struct{}{}
		}
	}
}

// forget stops watching an order whose payment failed.
func (c *convergence) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.orders, id)
	for p := range nParts {
		delete(c.waiting[p], id)
	}
}

// run polls every part's database until ctx ends.
func (c *convergence) run(ctx context.Context) {
	var wg sync.WaitGroup
	for p := range nParts {
		wg.Go(func() { c.poll(ctx, p) })
	}
	wg.Wait()
}

func (c *convergence) poll(ctx context.Context, p part) {
	tick := time.NewTicker(convergePollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ids := c.waitingFor(p)
		if len(ids) == 0 {
			continue
		}
		at := time.Now()
		var found []string
		if err := c.dbs[p].SelectContext(ctx, &found, p.query(), pq.Array(ids)); err != nil {
			c.mu.Lock()
			c.pollErrors++
			c.mu.Unlock()
			continue
		}
		c.mu.Lock()
		for _, id := range found {
			if t, ok := c.orders[id]; ok && t.seen[p].IsZero() {
				t.seen[p] = at
				delete(c.waiting[p], id)
			}
		}
		c.mu.Unlock()
	}
}

func (c *convergence) waitingFor(p part) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.waiting[p]))
	for id := range c.waiting[p] {
		ids = append(ids, id)
	}
	return ids
}

// pendingCount is how many orders lack a convergence part.
func (c *convergence) pendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.orders {
		if !t.converged() {
			n++
		}
	}
	return n
}

func (t *track) converged() bool {
	return !t.seen[partInventory].IsZero() && !t.seen[partPoints].IsZero() && !t.seen[partNotification].IsZero()
}

// waitAll waits until every expected order converged, or timeout passes.
func (c *convergence) waitAll(ctx context.Context, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(convergePollEvery)
	defer tick.Stop()
	for c.pendingCount() > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// latencies are the sorted pay→converged and pay→PAID latencies of the
// converged orders whose payment the walk sent, and how many watched
// orders did not converge.
type latencies struct {
	converged, paid []time.Duration
	unconverged     int
	pollErrors      int
}

func (c *convergence) stats() latencies {
	c.mu.Lock()
	defer c.mu.Unlock()
	var l latencies
	for _, t := range c.orders {
		if !t.converged() {
			l.unconverged++
			continue
		}
		if t.paySent.IsZero() {
			continue
		}
		last := t.seen[partInventory]
		for _, p := range []part{partPoints, partNotification} {
			if t.seen[p].After(last) {
				last = t.seen[p]
			}
		}
		l.converged = append(l.converged, last.Sub(t.paySent))
		if !t.seen[partPaid].IsZero() {
			l.paid = append(l.paid, t.seen[partPaid].Sub(t.paySent))
		}
	}
	slices.Sort(l.converged)
	slices.Sort(l.paid)
	l.pollErrors = c.pollErrors
	return l
}
