package backlog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// rebalanceGrace is how long the drill keeps sampling after the drain for
// the scaled-out group to settle, when the backlog drained first.
const rebalanceGrace = 30 * time.Second

// Output says where the drill writes while it runs.
type Output struct {
	// Table receives the report table at the end (stdout).
	Table io.Writer
	// Progress receives a line per phase and, while sampling, the live
	// line (stderr); nil writes none.
	Progress io.Writer
	// Live redraws the sampling line in place, for a terminal; otherwise a
	// line is written every ten samples.
	Live bool
}

// drill is one run's connections and state.
type drill struct {
	cfg     Config
	t       Target
	watched []string
	dbs     map[string]*sql.DB // each service's own database
	server  *sql.DB            // pg_stat_activity
	kcl     *kgo.Client
	adm     *kadm.Client
	ids     runIDs
	owners  map[string]int // member client address → pid
}

func open(cfg Config, t Target) (*drill, error) {
	d := &drill{cfg: cfg, t: t, watched: t.watched(), dbs: map[string]*sql.DB{}, owners: map[string]int{}}
	var err error
	if d.server, err = openDB(t.DatabaseURL, "postgres"); err != nil {
		return nil, err
	}
	for _, s := range d.watched {
		if d.dbs[s], err = openDB(t.DatabaseURL, t.Databases[s]); err != nil {
			d.close()
			return nil, err
		}
	}
	if d.kcl, err = kgo.NewClient(kgo.SeedBrokers(t.Brokers...), kgo.ClientID("backlog-drill")); err != nil {
		d.close()
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	d.adm = kadm.NewClient(d.kcl)
	d.ids = newRunIDs(cfg)
	return d, nil
}

func (d *drill) close() {
	if d.kcl != nil {
		d.kcl.Close()
	}
	for _, db := range d.dbs {
		db.Close()
	}
	if d.server != nil {
		d.server.Close()
	}
}

// Run runs the drill: one instance per scaled service, the publish, the
// scale-out after cfg.ScaleAfter, sampling every cfg.Interval until the
// backlog has drained, then the exactly-once checks and the report, which
// it writes to out.Table and, with cfg.Out, to report.json and report.html
// there. It returns the report even when a check failed (Report.Pass); an
// error means the drill itself could not run or finish.
func Run(ctx context.Context, cfg Config, t Target, out Output) (*Report, error) {
	cfg, t = cfg.withDefaults(), t.withDefaults()
	if err := errors.Join(cfg.Validate(), t.Validate()); err != nil {
		return nil, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	d, err := open(cfg, t)
	if err != nil {
		return nil, err
	}
	defer d.close()
	p := &progress{out: out, cfg: cfg}

	if s, err := d.used(ctx); err != nil {
		return nil, err
	} else if s != "" {
		return nil, fmt.Errorf("%w: run id %q was used before (%s has recorded its events); pick a new --run-id", cli.ErrUsage, cfg.RunID, s)
	}
	what := fmt.Sprintf("%d OrderPaid events", cfg.Count)
	if cfg.Mix {
		what = fmt.Sprintf("%d orders, mixed (%d events, %d of them twice)", cfg.Count, len(d.ids.events), d.ids.copies())
	}
	p.say("backlog drill %s: %s; %s scaled 1 → %d after %s", cfg.RunID, what,
		strings.Join(cfg.Services, ", "), cfg.Instances, cfg.ScaleAfter)
	p.say("scaling %s to 1 instance", strings.Join(cfg.Services, ", "))
	if err := d.scaleAll(ctx, 1); err != nil {
		return nil, fmt.Errorf("scale to one instance: %w", err)
	}

	tl, drainErr := d.drain(ctx, p)
	p.end()

	rep := &Report{}
	if tl != nil {
		rep = buildReport(cfg, tl)
	}
	if drainErr == nil || errors.Is(drainErr, context.Canceled) {
		p.say("verifying the run in the consumers' databases")
		// An interrupted run is still worth checking as far as it got.
		vctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		checks, err := d.verify(vctx)
		cancel()
		rep.Checks = append(rep.Checks, checks...)
		drainErr = errors.Join(drainErr, err)
	}
	rep.Pass = drainErr == nil && len(rep.Checks) > 0 && !slices.ContainsFunc(rep.Checks, func(c Check) bool { return !c.Pass })

	if !cfg.KeepInstances {
		p.say("scaling %s back to 1 instance", strings.Join(cfg.Services, ", "))
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		if err := d.scaleAll(sctx, 1); err != nil {
			drainErr = errors.Join(drainErr, fmt.Errorf("scale back to one instance: %w", err))
		}
		cancel()
	}
	if cfg.Out != "" && tl != nil {
		if err := writeFiles(cfg.Out, rep, tl.samples); err != nil {
			drainErr = errors.Join(drainErr, err)
		}
	}
	if out.Table != nil {
		if err := WriteTable(out.Table, rep); err != nil {
			drainErr = errors.Join(drainErr, err)
		}
	}
	return rep, drainErr
}

// scaleAll scales every configured service to n instances at once.
func (d *drill) scaleAll(ctx context.Context, n int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(d.cfg.Services))
	for i, s := range d.cfg.Services {
		wg.Go(func() {
			if err := d.t.Scaler.Scale(ctx, s, n); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// timeline is what happened during the drain: every sample and the
// moments of the publish, the scale-out and the drain, in seconds since
// the publish started.
type timeline struct {
	start          time.Time
	samples        []Sample
	publish        loadgen.Result
	publishErr     error
	publishEnd     *float64
	scaleRequested *float64
	scaleReady     *float64
	scaleErr       error
	rebalanced     *float64
	drained        *float64
	accounted      map[string]int
	timedOut       bool
	maxConnections int
}

// published is the end of the publish, at seconds since its start.
type published struct {
	res loadgen.Result
	err error
	at  float64
}

// scaled is the end of the scale-out: when it was asked for and when the
// new instances were ready, in seconds since the publish started.
type scaled struct {
	requested, ready float64
	err              error
}

// drain publishes the run, scales out after ScaleAfter and samples until
// the backlog is gone and the scaled-out groups have settled, or Timeout.
func (d *drill) drain(ctx context.Context, p *progress) (*timeline, error) {
	insts, err := d.t.Lister.Instances(ctx, Inventory)
	if err != nil || len(insts) == 0 {
		return nil, fmt.Errorf("inventory's URL, to seed the stock: %w", errors.Join(err, errors.New("no instance")))
	}
	lc := d.cfg.loadgen(insts[0].URL, &d.t)
	var sent atomic.Int64
	lc.Progress = func(n int) { sent.Add(int64(n)) }

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	maxConns, err := d.maxConnections(ctx)
	if err != nil {
		return nil, err
	}
	smp := &sampler{d: d, counters: map[processKey]*instanceCounters{}, prev: map[string]float64{}}
	baseline := smp.take(ctx, time.Now(), 0, true)
	tl := &timeline{start: time.Now(), maxConnections: maxConns}
	baseline.Elapsed = 0
	tl.samples = append(tl.samples, baseline)
	since := func() float64 { return time.Since(tl.start).Seconds() }

	// The publish and the scale-out run on their own goroutines, which
	// note their moments themselves: a sample that takes long must not
	// delay them.
	p.say("publishing %d events (stock of %d SKUs set to %d each), sampling every %s", d.cfg.Count, d.cfg.SKUs, d.cfg.seedStock(), d.cfg.Interval)
	pubc := make(chan published, 1)
	wg.Go(func() {
		res, err := loadgen.Run(ctx, lc, io.Discard, io.Discard)
		pubc <- published{res, err, since()}
	})
	scalec := make(chan scaled, 1)
	wg.Go(func() {
		timer := time.NewTimer(d.cfg.ScaleAfter)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		r := scaled{requested: since()}
		p.say("scaling %s to %d instances", strings.Join(d.cfg.Services, ", "), d.cfg.Instances)
		r.err = d.scaleAll(ctx, d.cfg.Instances)
		r.ready = since()
		scalec <- r
	})
	tick := time.NewTicker(d.cfg.Interval)
	defer tick.Stop()
	deadline := time.NewTimer(d.cfg.Timeout)
	defer deadline.Stop()
	var drainedAt time.Time

	for {
		select {
		case <-ctx.Done():
			return tl, ctx.Err()
		case <-deadline.C:
			tl.timedOut = true
			return tl, nil
		case r := <-pubc:
			tl.publish, tl.publishErr, tl.publishEnd = r.res, r.err, &r.at
			if r.err != nil {
				return tl, fmt.Errorf("publish: %w", r.err)
			}
			p.say("published %d events in %.1fs (%.0f events/s)", r.res.Published, r.res.Duration.Seconds(), r.res.Rate())
		case r := <-scalec:
			tl.scaleRequested, tl.scaleReady, tl.scaleErr = &r.requested, &r.ready, r.err
			if r.err != nil {
				p.say("scale-out: %v", r.err)
			} else {
				p.say("%d instances of each ready %.1fs after the request", d.cfg.Instances, r.ready-r.requested)
			}
		case <-tick.C:
			s := smp.take(ctx, tl.start, int(sent.Load()), false)
			tl.samples = append(tl.samples, s)
			p.sample(s)
			if tl.rebalanced == nil && tl.scaleReady != nil && d.settled(s) {
				tl.rebalanced = &s.Elapsed
			}
			if tl.drained == nil && tl.publishEnd != nil && tl.scaleReady != nil && noLag(s) {
				n, err := d.accounted(ctx)
				if err != nil {
					return tl, err
				}
				tl.accounted = n
				if d.allAccounted(n) {
					tl.drained, drainedAt = &s.Elapsed, time.Now()
				}
			}
			if tl.drained != nil && (tl.rebalanced != nil || time.Since(drainedAt) > rebalanceGrace) {
				return tl, nil
			}
		}
	}
}

func noLag(s Sample) bool {
	for _, g := range s.Groups {
		if g.Lag != 0 {
			return false
		}
	}
	return len(s.Groups) > 0
}

// allAccounted reports whether every verified service has accounted for
// every event of the run it handles.
func (d *drill) allAccounted(n map[string]int) bool {
	for s, v := range n {
		if v != len(d.ids.handled[s]) {
			return false
		}
	}
	return len(n) > 0
}

// settled reports whether every scaled group has one member per instance,
// each owning partitions, together owning every partition.
func (d *drill) settled(s Sample) bool {
	for _, g := range s.Groups {
		if !slices.Contains(d.cfg.Services, g.Service) {
			continue
		}
		if len(g.Members) != d.cfg.Instances || g.GroupState != "Stable" {
			return false
		}
		owned := 0
		for _, m := range g.Members {
			if len(m.Partitions) == 0 && d.cfg.Instances <= len(g.PartitionLag) {
				return false
			}
			owned += len(m.Partitions)
		}
		if len(g.PartitionLag) > 0 && owned != len(g.PartitionLag) {
			return false
		}
	}
	return true
}

// exclusive reports the first partition of a sample owned by two members
// of one group at once, if any.
func exclusive(s Sample) (string, bool) {
	for _, g := range s.Groups {
		owner := map[int32]string{}
		for _, m := range g.Members {
			who := cmp.Or(m.Instance, m.ClientHost)
			for _, p := range m.Partitions {
				if other, ok := owner[p]; ok {
					return fmt.Sprintf("%s partition %d owned by %s and %s at %.1fs", g.Group, p, other, who, s.Elapsed), false
				}
				owner[p] = who
			}
		}
	}
	return "", true
}
