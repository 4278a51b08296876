package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// How the API benchmark detects convergence (docs/benchmarks.md): one
// poller per database (order, inventory, points, notification) asks every
// convergePollEvery which of the orders it still waits for have their
// effect committed there, with one indexed query over those order ids
// (a few dozen at 200 orders/s). An effect is stamped with the time its
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
)

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
// API (create, checkout, pay) at a steady rate and prints the latency from
// sending the payment until inventory, points and notification have all
// applied the order's OrderPaid (p50-ms, p99-ms, max-ms), the part of it
// until the order is PAID (paid-p50-ms), the achieved rate (orders/s) and
// the failed or unconverged orders (errors).
func BenchmarkAPIPayToConverged(b *testing.B) {
	set := loadSettings(b)
	s := harness.Start(b, harness.Options{Partitions: 64, Env: suiteDefaults()})
	for k := range apiSKUs {
		s.SetStock(benchSKU(k), apiStock)
	}
	w := newConvergence(map[part]*sqlx.DB{
		partPaid: s.DB("order"), partInventory: s.DB("inventory"),
		partPoints: s.DB("points"), partNotification: s.DB("notification"),
	})
	backlog := &outboxPeaks{dbs: map[string]*sqlx.DB{"payment": s.DB("payment"), "order": s.DB("order")}, peak: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var wg sync.WaitGroup
		wg.Go(func() { w.run(ctx) })
		wg.Go(func() { backlog.run(ctx) })
		wg.Wait()
	}()
	b.Cleanup(func() {
		cancel()
		<-watched
	})
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	b.Cleanup(client.CloseIdleConnections)
	gen := generator{client: client, orderURL: s.URL("order"), paymentURL: s.URL("payment"), watch: w}

	var paid int
	var issuing time.Duration
	var failed int64
	b.ResetTimer()
	for round := range b.N {
		r := gen.run(ctx, round, set.APIOrders, set.APIRate)
		paid += r.paid
		issuing += r.took
		failed += r.failed
		if !w.waitAll(ctx, convergeTimeout) {
			b.Logf("round %d: %d orders not converged %v after the last payment", round, w.pendingCount(), convergeTimeout)
		}
	}
	b.StopTimer()
	st := w.stats()
	if len(st.converged) == 0 {
		b.Fatalf("no order converged; %d failed, first error: %v", failed, gen.firstError())
	}
	errorsTotal := float64(failed) + float64(st.unconverged)
	rate := float64(paid) / issuing.Seconds()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(percentile(st.converged, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(st.converged, 99)), "p99-ms")
	b.ReportMetric(ms(st.converged[len(st.converged)-1]), "max-ms")
	b.ReportMetric(ms(percentile(st.paid, 50)), "paid-p50-ms")
	b.ReportMetric(rate, "orders/s")
	b.ReportMetric(errorsTotal, "errors")
	b.Logf("%d orders × %d round(s) at %d/s: %d paid (%.1f/s achieved), %d failed, %d not converged; pay→converged p50 %v p90 %v p99 %v max %v; pay→PAID p50 %v p99 %v; resolution %v, %d failed polls",
		set.APIOrders, b.N, set.APIRate, paid, rate, failed, st.unconverged,
		percentile(st.converged, 50), percentile(st.converged, 90), percentile(st.converged, 99), st.converged[len(st.converged)-1],
		percentile(st.paid, 50), percentile(st.paid, 99), convergePollEvery, st.pollErrors)
	for _, name := range []string{"payment", "order"} {
		o := backlog.summary(b, name)
		b.Logf("%s outbox: peak backlog %d pending rows; committed→sent p50 %v p99 %v; %d rows needed more than one attempt (most: %d)",
			name, backlog.get(name), o.P50, o.P99, o.Retried, o.MostAttempts)
	}
	if err := gen.firstError(); err != nil {
		b.Logf("first error: %v", err)
	}
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
			var n int
			if err := db.GetContext(ctx, &n, `SELECT count(*) FROM outbox_events WHERE status = 'PENDING'`); err != nil {
				continue // a missed sample only lowers a peak
			}
			o.mu.Lock()
			o.peak[name] = max(o.peak[name], n)
			o.mu.Unlock()
		}
	}
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
	watch                *convergence

	mu    sync.Mutex
	first error
}

type roundResult struct {
	paid   int
	failed int64
	// took is from the first order's start to the last payment's answer.
	took time.Duration
}

// run starts order i of the round at start + i/rate (open loop: a slow
// answer does not delay the next order) and returns when every walk ended.
func (g *generator) run(ctx context.Context, round, orders, rate int) roundResult {
	interval := time.Second / time.Duration(rate)
	slots := make(chan struct{}, apiMaxInFlight)
	var wg sync.WaitGroup
	var paid, failed atomic.Int64
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for i := range orders {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return roundResult{}
			case <-timer.C:
			}
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := g.walk(ctx, fmt.Sprintf("O-bench-%d-%06d", round, i), i); err != nil {
				failed.Add(1)
				g.fail(err)
				return
			}
			paid.Add(1)
		}()
	}
	wg.Wait()
	return roundResult{paid: int(paid.Load()), failed: failed.Load(), took: time.Since(start)}
}

func (g *generator) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.first == nil {
		g.first = err
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
	if _, err := g.call(ctx, g.orderURL+"/orders", map[string]any{
		"orderId": id, "customerId": fmt.Sprintf("C-bench-%d", i%500), "currency": apiCurrency, "items": []any{item},
	}); err != nil {
		return fmt.Errorf("create %s: %w", id, err)
	}
	if _, err := g.call(ctx, g.orderURL+"/orders/"+url.PathEscape(id)+"/checkout", nil); err != nil {
		return fmt.Errorf("checkout %s: %w", id, err)
	}
	g.watch.expect(id, time.Now())
	if _, err := g.call(ctx, g.paymentURL+"/payments", map[string]any{
		"orderId": id, "amount": apiUnitPrice, "currency": apiCurrency,
	}); err != nil {
		g.watch.forget(id)
		return fmt.Errorf("pay %s: %w", id, err)
	}
	return nil
}

// call posts body as JSON and wants 200 with businessCode SUCCESS.
func (g *generator) call(ctx context.Context, target string, body any) (map[string]any, error) {
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
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("post %s: %w", target, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read the answer of %s: %w", target, err)
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
// converged orders, and how many orders did not converge.
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
