// Package app runs reconciliation: runs that compare every service's facts
// about orders older than the convergence deadline, record each finding and
// take its compensation once; on-demand checks of one order; and the
// convergence monitor that measures how long orders take to converge.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/rules"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// Config tunes reconciliation.
type Config struct {
	// Deadline is how long an order may take to converge: a run checks
	// orders whose last change is older (unless told otherwise), and a
	// message pending longer is stuck.
	Deadline time.Duration
	// PageSize is how many orders are read and compared at once.
	PageSize int
	// OrphanPageSize is how many order ids the orphan pass reads from a
	// consumer, and looks up at the order service, at once: ids alone,
	// so a page may be as large as the services answer.
	OrphanPageSize int
	// MaxAttempts bounds how often a failing compensation is tried, over
	// all runs.
	MaxAttempts int
	// Heartbeat is how often a run records that its process is alive.
	Heartbeat time.Duration
	// AbandonAfter is how long a RUNNING run may go without a heartbeat
	// before it is marked FAILED: its process stopped mid-run.
	AbandonAfter time.Duration
	// Clock tells the time; nil is time.Now. A test moves it past a
	// deadline instead of waiting for it.
	Clock func() time.Time
}

// DefaultConfig returns the defaults of README.md (Configuration).
func DefaultConfig() Config {
	return Config{Deadline: 30 * time.Second, PageSize: 500, OrphanPageSize: MaxPageSize, MaxAttempts: 3,
		Heartbeat: 10 * time.Second, AbandonAfter: time.Minute}
}

// Validate reports an unusable configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Deadline <= 0 {
		errs = append(errs, errors.New("the convergence deadline must be positive"))
	}
	if c.PageSize < 1 || c.PageSize > MaxPageSize {
		errs = append(errs, fmt.Errorf("the page size must be between 1 and %d", MaxPageSize))
	}
	if c.OrphanPageSize < 1 || c.OrphanPageSize > MaxPageSize {
		errs = append(errs, fmt.Errorf("the orphan pass's page size must be between 1 and %d", MaxPageSize))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("compensations need at least one attempt"))
	}
	if c.Heartbeat <= 0 || c.AbandonAfter < 3*c.Heartbeat {
		errs = append(errs, errors.New("a run's heartbeat must be positive and a run abandoned only after three missed"))
	}
	return errors.Join(errs...)
}

// MaxPageSize is the most orders a page may hold: the most the services
// answer in one request (pkg/admin's MaxOrderIDs).
const MaxPageSize = 1000

// MaxOrderIDs bounds the orders one run may be asked for by id.
const MaxOrderIDs = 10_000

// ErrUnavailable wraps a failure to read or reach a service: reconciliation
// cannot judge an order without every service's facts.
var ErrUnavailable = errors.New("service unavailable")

// ErrRunNotFound is returned for a run id that does not exist.
var ErrRunNotFound = errors.New("reconciliation run not found")

// ErrRunInProgress is returned by Audit.StartRun while another run is
// RUNNING: one runs at a time, over every process.
var ErrRunInProgress = errors.New("a reconciliation run is in progress")

// Cursor is a position in the order service's orders, by last change
// (orderapi.PageCursor, its time parsed).
type Cursor struct {
	ChangedAfter time.Time
	AfterID      string
}

// Peers reads the services' facts and takes compensations through their
// APIs.
type Peers interface {
	ChangedOrders(ctx context.Context, after Cursor, before time.Time, limit int) ([]rec.Order, *Cursor, error)
	Orders(ctx context.Context, ids []string) ([]rec.Order, error)
	// UnknownOrders returns those of ids the order service does not know,
	// in the order given.
	UnknownOrders(ctx context.Context, ids []string) ([]string, error)
	Facts(ctx context.Context, orders []rec.Order) ([]rec.Facts, error)
	Refund(ctx context.Context, orderID, refundID string, amount decimal.Decimal, reason string) (string, error)
	Republish(ctx context.Context, service string, eventIDs []string) (string, error)
	Replay(ctx context.Context, service string, deadLetterID int64) (string, error)
	Fence(ctx context.Context, orderID string, atLeast int64) (string, error)
	EffectOrders(ctx context.Context, service, after string, before time.Time, limit int) ([]string, string, error)
}

// Audit records runs, findings and actions.
type Audit interface {
	StartRun(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error)
	Progress(ctx context.Context, run rec.Run) error
	Beat(ctx context.Context, id int64) error
	Abandon(ctx context.Context, before time.Time) ([]int64, error)
	FinishRun(ctx context.Context, run rec.Run) error
	AddFindings(ctx context.Context, runID int64, fs []rec.Recorded) error
	Claim(ctx context.Context, a rec.Taken, stale time.Duration, maxAttempts int) (bool, rec.Taken, error)
	Finish(ctx context.Context, key string, status rec.ActionStatus, outcome string) error
	FindingCount(ctx context.Context, orderID string) (int, error)
}

// Reconciler runs reconciliation.
type Reconciler struct {
	cfg     Config
	peers   Peers
	audit   Audit
	metrics *Metrics
	logger  *slog.Logger
	now     func() time.Time
	// started hands runs begun by Start to Serve, which runs them one at
	// a time.
	started chan started
}

// started is a run Start recorded, for Serve to do.
type started struct {
	run   rec.Run
	scope rec.Scope
}

// NewReconciler returns a reconciler; metrics may be nil.
func NewReconciler(cfg Config, peers Peers, audit Audit, metrics *Metrics, logger *slog.Logger) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Clock
	if now == nil {
		now = time.Now
	}
	return &Reconciler{cfg: cfg, peers: peers, audit: audit, metrics: metrics, logger: logger, now: now,
		started: make(chan started, 1)}, nil
}

// Deadline is the convergence deadline, the default minimum age of a run.
func (r *Reconciler) Deadline() time.Duration { return r.cfg.Deadline }

// Start records a run of scope, RUNNING, and hands it to Serve, which does
// the work in the service's context: the run outlives the request that
// started it, whose answer is the run's id at once. One run runs at a
// time: while one does, Start returns ErrRunInProgress naming it.
func (r *Reconciler) Start(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	run, err := r.begin(ctx, startedBy, scope)
	if err != nil {
		return rec.Run{}, err
	}
	select {
	case r.started <- started{run: run, scope: scope}:
		return run, nil
	default:
		// Serve has not taken the last run yet, which the database's one
		// RUNNING run rules out unless that run was abandoned.
		run.Status, run.Error = rec.RunFailed, "the service had another run waiting to start"
		return run, r.finish(context.WithoutCancel(ctx), &run)
	}
}

// Serve does the runs Start records, one at a time, until ctx ends; a run
// that ctx ends is recorded FAILED. Between runs, and when it begins, it
// marks FAILED the runs whose process stopped mid-run (no heartbeat for
// AbandonAfter), so no run stays RUNNING for ever.
func (r *Reconciler) Serve(ctx context.Context) error {
	r.abandon(ctx)
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			select {
			case s := <-r.started:
				s.run.Status, s.run.Error = rec.RunFailed, "the service stopped before the run began"
				_ = r.finish(context.WithoutCancel(ctx), &s.run)
			default:
			}
			return nil
		case s := <-r.started:
			_, _ = r.execute(ctx, s.run, s.scope)
		case <-t.C:
			r.abandon(ctx)
		}
	}
}

// Run reconciles the orders of scope in ctx and returns the run with its
// findings once it is done. A run that cannot read every service fails,
// recording what it had done so far: an order is never judged on part of
// its facts.
func (r *Reconciler) Run(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	run, err := r.begin(ctx, startedBy, scope)
	if err != nil {
		return rec.Run{}, err
	}
	return r.execute(ctx, run, scope)
}

// begin checks scope and records the run, RUNNING, first marking any run
// whose process died: a dead run must not refuse a new one.
func (r *Reconciler) begin(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	if len(scope.OrderIDs) > MaxOrderIDs {
		return rec.Run{}, rules.Invalid("orderIds", "has %d entries; at most %d are allowed", len(scope.OrderIDs), MaxOrderIDs)
	}
	for i, id := range scope.OrderIDs {
		if err := rules.ValidateID(fmt.Sprintf("orderIds[%d]", i), id); err != nil {
			return rec.Run{}, err
		}
	}
	if scope.MinAge < 0 {
		return rec.Run{}, rules.Invalid("minAge", "must not be negative, got %s", scope.MinAge)
	}
	r.abandon(ctx)
	return r.audit.StartRun(ctx, startedBy, scope)
}

// abandon marks FAILED the runs without a heartbeat for AbandonAfter.
func (r *Reconciler) abandon(ctx context.Context) {
	ids, err := r.audit.Abandon(ctx, r.now().Add(-r.cfg.AbandonAfter))
	if err != nil {
		if ctx.Err() == nil {
			r.logger.WarnContext(ctx, "mark abandoned reconciliation runs", "error", err)
		}
		return
	}
	for _, id := range ids {
		r.logger.WarnContext(ctx, "reconciliation run abandoned: its process stopped mid-run", "run", id)
	}
}

// execute does run, recording its progress after each page and beating
// its heartbeat while it works, and records how it ended.
func (r *Reconciler) execute(ctx context.Context, run rec.Run, scope rec.Scope) (rec.Run, error) {
	beating, stop := context.WithCancel(ctx)
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		t := time.NewTicker(r.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-beating.Done():
				return
			case <-t.C:
				if err := r.audit.Beat(beating, run.ID); err != nil && beating.Err() == nil {
					r.logger.WarnContext(beating, "reconciliation run heartbeat", "run", run.ID, "error", err)
				}
			}
		}
	}()
	defer func() { stop(); <-beat }()

	ctx = WithRequestedBy(ctx, fmt.Sprintf("reconciliation run %d (%s)", run.ID, run.StartedBy))
	err := r.pages(ctx, &run, scope, func(facts []rec.Facts) error {
		recorded, actions, err := r.settle(ctx, &run, facts)
		run.Checked += len(facts)
		run.Actions += actions
		run.Findings = append(run.Findings, recorded...)
		if err != nil {
			return err
		}
		if err := r.audit.AddFindings(ctx, run.ID, recorded); err != nil {
			return err
		}
		return r.audit.Progress(ctx, run)
	})
	if err == nil && len(scope.OrderIDs) == 0 {
		err = r.orphans(ctx, &run, run.StartedAt.Add(-scope.MinAge))
	}
	run.Status = rec.RunSucceeded
	if err != nil {
		run.Status, run.Error = rec.RunFailed, err.Error()
	}
	// The audit outlives a cancelled run: finish the run's record.
	if ferr := r.finish(context.WithoutCancel(ctx), &run); ferr != nil {
		return run, errors.Join(err, ferr)
	}
	r.metrics.run(run)
	r.logger.InfoContext(ctx, "reconciliation run finished", "run", run.ID, "startedBy", run.StartedBy, "status", run.Status,
		"checked", run.Checked, "inFlight", len(run.InFlight), "findings", len(run.Findings), "actions", run.Actions, "error", run.Error)
	return run, nil
}

// finish records how run ended.
func (r *Reconciler) finish(ctx context.Context, run *rec.Run) error {
	finished := r.now()
	run.FinishedAt = &finished
	if err := r.audit.FinishRun(ctx, *run); err != nil {
		r.logger.ErrorContext(ctx, "record the end of a reconciliation run", "run", run.ID, "error", err)
		return err
	}
	return nil
}

// pages hands the facts of the scope's orders to each, a page at a time.
// Orders named by id whose last change is younger than the scope's MinAge
// are in flight: they go into run.InFlight, not compared, so neither a
// false finding nor the once-per-fact action key is spent on them.
func (r *Reconciler) pages(ctx context.Context, run *rec.Run, scope rec.Scope, each func([]rec.Facts) error) error {
	before := run.StartedAt.Add(-scope.MinAge)
	if len(scope.OrderIDs) > 0 {
		for start := 0; start < len(scope.OrderIDs); start += r.cfg.PageSize {
			ids := scope.OrderIDs[start:min(start+r.cfg.PageSize, len(scope.OrderIDs))]
			orders, err := r.peers.Orders(ctx, ids)
			if err != nil {
				return err
			}
			settled, unknown := orders[:0:0], orders[:0:0]
			for _, o := range orders {
				switch {
				case !o.Found:
					unknown = append(unknown, o)
				case scope.MinAge > 0 && !o.UpdatedAt.Before(before):
					run.InFlight = append(run.InFlight, o.ID)
				default:
					settled = append(settled, o)
				}
			}
			if err := r.compare(ctx, settled, each); err != nil {
				return err
			}
			if err := r.namedOrphans(ctx, run, unknown); err != nil {
				return err
			}
		}
		return nil
	}
	cursor := Cursor{}
	for {
		orders, next, err := r.peers.ChangedOrders(ctx, cursor, before, r.cfg.PageSize)
		if err != nil {
			return err
		}
		if err := r.compare(ctx, orders, each); err != nil {
			return err
		}
		if next == nil {
			return nil
		}
		cursor = *next
	}
}

// MaxOrphans bounds the ORPHAN_EFFECT findings one run records for one
// service: a drill that published thousands of synthetic orders to the
// broker leaves as many orphans, which a run names a bounded number of at
// a time instead of filling the audit with them on every schedule.
const MaxOrphans = 100

// orphans looks up, a page at a time, every order each consumer holds
// effects for that were last written before before, and records an
// ORPHAN_EFFECT finding for each order the order service does not know,
// up to MaxOrphans a service. Effects follow their order, so an order
// unknown now was never known or was lost: no second read is needed.
// It records its phase and how far it has read each service after every
// page.
func (r *Reconciler) orphans(ctx context.Context, run *rec.Run, before time.Time) error {
	started := r.now()
	run.Phase, run.OrphansStartedAt = rec.PhaseOrphans, &started
	for _, service := range rec.Consumers() {
		run.OrphanScans = append(run.OrphanScans, rec.OrphanScan{Service: service})
	}
	if err := r.audit.Progress(ctx, *run); err != nil {
		return err
	}
	for i := range run.OrphanScans {
		if err := r.scan(ctx, run, &run.OrphanScans[i], before); err != nil {
			return err
		}
	}
	return nil
}

// scan pages one consumer's orders for the orphan pass. Only the ids of a
// page go to the order service, which answers those it does not know: a
// page of 1 000 costs two small requests.
func (r *Reconciler) scan(ctx context.Context, run *rec.Run, scan *rec.OrphanScan, before time.Time) error {
	for after := ""; !scan.Done; {
		ids, next, err := r.peers.EffectOrders(ctx, scan.Service, after, before, r.cfg.OrphanPageSize)
		if err != nil {
			return err
		}
		var unknown []string
		if len(ids) > 0 {
			if unknown, err = r.peers.UnknownOrders(ctx, ids); err != nil {
				return err
			}
		}
		scan.Pages++
		scan.Orders += len(ids)
		var recorded []rec.Recorded
		for _, id := range unknown[:min(len(unknown), MaxOrphans-scan.Orphans)] {
			f := rec.Orphan(scan.Service, id)
			out, _, err := r.act(ctx, run, f) // a person's action: nothing is taken
			if err != nil {
				return err
			}
			recorded = append(recorded, out)
			r.metrics.finding(f)
		}
		scan.Orphans += len(recorded)
		run.Findings = append(run.Findings, recorded...)
		if err := r.audit.AddFindings(ctx, run.ID, recorded); err != nil {
			return err
		}
		scan.Done = next == "" || len(ids) == 0 || scan.Orphans == MaxOrphans
		after = next
		if err := r.audit.Progress(ctx, *run); err != nil {
			return err
		}
	}
	return nil
}

// namedOrphans records an ORPHAN_EFFECT finding for each service holding
// effects of an order named by id that the order service does not know:
// after a restore, the orders created since the backup, which a run over
// every order names only up to MaxOrphans a service.
func (r *Reconciler) namedOrphans(ctx context.Context, run *rec.Run, unknown []rec.Order) error {
	if len(unknown) == 0 {
		return nil
	}
	facts, err := r.peers.Facts(ctx, unknown)
	if err != nil {
		return err
	}
	var recorded []rec.Recorded
	for _, f := range facts {
		for _, finding := range rec.Orphans(f) {
			out, _, err := r.act(ctx, run, finding) // a person's action: nothing is taken
			if err != nil {
				return err
			}
			recorded = append(recorded, out)
			r.metrics.finding(finding)
		}
	}
	run.Findings = append(run.Findings, recorded...)
	return r.audit.AddFindings(ctx, run.ID, recorded)
}

func (r *Reconciler) compare(ctx context.Context, orders []rec.Order, each func([]rec.Facts) error) error {
	var known []rec.Order
	for _, o := range orders {
		if o.Found {
			known = append(known, o)
		}
	}
	if len(known) == 0 {
		return nil
	}
	facts, err := r.peers.Facts(ctx, known)
	if err != nil {
		return err
	}
	return each(facts)
}

// settle compares each order's facts, and decides and takes the
// compensation of each finding. An order with findings is read again
// (the order first, then the others) and compared anew, and only what the
// second comparison finds is recorded and acted on: the first read may
// pair the order as it was with another service's effects of a later
// change (an order read as CREATED, checked out and paid before its
// payment was read). A refund is taken only if both comparisons call for
// it with the same key: the second read of the order comes after the
// first read of the payment, so it sees the status that payment belongs
// to. A consumer's version past the order's, seen on the first read and
// still past the order read again, is an ORDER_VERSION_REGRESSED finding
// whose action fences the order's version; the order's other findings
// wait for the next run, which compares the fenced order anew.
func (r *Reconciler) settle(ctx context.Context, run *rec.Run, facts []rec.Facts) ([]rec.Recorded, int, error) {
	stuckBefore := r.now().Add(-r.cfg.Deadline)
	first := map[string][]rec.Finding{}
	seen := map[string]rec.Facts{}
	var suspects []string
	for _, f := range facts {
		fs := rec.Compare(f, stuckBefore)
		if len(fs) > 0 || len(rec.VersionRegressions(f.Order, f)) > 0 {
			first[f.Order.ID], seen[f.Order.ID] = fs, f
			suspects = append(suspects, f.Order.ID)
		}
	}
	if len(suspects) == 0 {
		return nil, 0, nil
	}
	again, err := r.reread(ctx, suspects)
	if err != nil {
		return nil, 0, err
	}
	var out []rec.Recorded
	actions := 0
	for _, f := range again {
		findings := rec.VersionRegressions(f.Order, seen[f.Order.ID])
		if len(findings) == 0 {
			findings = rec.Compare(f, stuckBefore)
		}
		// An order whose version went back is fenced first: its other
		// findings follow from the changes it lost, and their actions
		// (a republish of its events, say) would emit versions every
		// consumer ignores as stale.
		for _, finding := range findings {
			if finding.Action.Type == rec.ActionRefund && !sameAction(first[f.Order.ID], finding) {
				out = append(out, r.deferred(run, finding))
				r.metrics.finding(finding)
				continue
			}
			recorded, took, err := r.act(ctx, run, finding)
			out = append(out, recorded)
			if took {
				actions++
			}
			r.metrics.finding(finding)
			if err != nil {
				return out, actions, err
			}
		}
	}
	return out, actions, nil
}

// reread reads the orders again, then every service's facts of those the
// order service still knows.
func (r *Reconciler) reread(ctx context.Context, ids []string) ([]rec.Facts, error) {
	orders, err := r.peers.Orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	var known []rec.Order
	for _, o := range orders {
		if o.Found {
			known = append(known, o)
		}
	}
	if len(known) == 0 {
		return nil, nil
	}
	return r.peers.Facts(ctx, known)
}

// sameAction reports whether fs holds a finding of f's kind calling for
// f's action under f's key.
func sameAction(fs []rec.Finding, f rec.Finding) bool {
	for _, g := range fs {
		if g.Kind == f.Kind && g.Action.Type == f.Action.Type && g.Action.Key == f.Action.Key {
			return true
		}
	}
	return false
}

// deferred records a refund that only the second read called for: the
// order may have changed between the reads, so the next run decides.
func (r *Reconciler) deferred(run *rec.Run, f rec.Finding) rec.Recorded {
	return rec.Recorded{RunID: run.ID, OrderID: f.OrderID, Kind: f.Kind, Service: f.Service, Expected: f.Expected,
		Actual: f.Actual, Action: f.Action.Type, ActionKey: f.Action.Key, DetectedAt: r.now(),
		Outcome: "DEFERRED: the first read did not call for this refund; the next run decides"}
}

// staleClaim is how long an action may stay IN_PROGRESS before another run
// takes it over: its run crashed between claiming and finishing it.
const staleClaim = time.Minute

// act takes the compensation of a finding, once per key over all runs, and
// returns the finding as recorded and whether this run took an action.
func (r *Reconciler) act(ctx context.Context, run *rec.Run, f rec.Finding) (rec.Recorded, bool, error) {
	out := rec.Recorded{RunID: run.ID, OrderID: f.OrderID, Kind: f.Kind, Service: f.Service, Expected: f.Expected,
		Actual: f.Actual, Action: f.Action.Type, ActionKey: f.Action.Key, DetectedAt: r.now()}
	if f.Action.Type == rec.ActionManualReview {
		out.Outcome = "OPEN: " + f.Action.Reason
		return out, false, nil
	}
	claimed, taken, err := r.audit.Claim(ctx, rec.Taken{Key: f.Action.Key, RunID: run.ID, OrderID: f.OrderID, Service: f.Action.Service,
		Action: f.Action.Type, RequestedBy: RequestedByOf(ctx)}, staleClaim, r.cfg.MaxAttempts)
	if err != nil {
		return out, false, err
	}
	if !claimed {
		out.Outcome = r.alreadyTaken(taken, f)
		if taken.Status == rec.ActionDone && taken.FinishedAt != nil && r.now().Sub(*taken.FinishedAt) > r.cfg.Deadline {
			// The action had its time and the finding is still there.
			out.Action = rec.ActionManualReview
		}
		return out, false, nil
	}
	outcome, err := r.take(ctx, f.OrderID, f.Action)
	status := rec.ActionDone
	if err != nil {
		// The status is the outcome's prefix below, as for one done.
		status, outcome = rec.ActionFailed, err.Error()
	}
	r.metrics.action(f.Action.Type, status)
	if ferr := r.audit.Finish(context.WithoutCancel(ctx), f.Action.Key, status, outcome); ferr != nil {
		return out, true, ferr
	}
	out.Outcome = string(status) + ": " + outcome
	return out, true, nil
}

func (r *Reconciler) alreadyTaken(t rec.Taken, f rec.Finding) string {
	switch {
	case t.Status == rec.ActionDone && t.FinishedAt != nil && r.now().Sub(*t.FinishedAt) > r.cfg.Deadline:
		return fmt.Sprintf("ESCALATED: %s by run %d did not resolve it (%s); a person must look", t.Action, t.RunID, t.Outcome)
	case t.Status == rec.ActionFailed:
		return fmt.Sprintf("GIVEN_UP: %s failed %d times, last in run %d (%s)", t.Action, t.Attempts, t.RunID, t.Outcome)
	}
	return fmt.Sprintf("ALREADY_TAKEN: %s by run %d, %s (%s)", f.Action.Type, t.RunID, t.Status, t.Outcome)
}

// take calls the owning service's API.
func (r *Reconciler) take(ctx context.Context, orderID string, a rec.Action) (string, error) {
	switch a.Type {
	case rec.ActionRefund:
		return r.peers.Refund(ctx, orderID, a.RefundID, a.Amount, a.Reason)
	case rec.ActionRepublish:
		return r.peers.Republish(ctx, a.Service, a.EventIDs)
	case rec.ActionReplay:
		return r.peers.Replay(ctx, a.Service, a.DeadLetterID)
	case rec.ActionFence:
		return r.peers.Fence(ctx, orderID, a.AtLeast)
	}
	return "", fmt.Errorf("no way to take action %s", a.Type)
}

type requestedByKey struct{}

// WithRequestedBy names who a run's calls are made for (the peers send it
// as X-Operator, which the audits of a replay, a republish and a refund
// record).
func WithRequestedBy(ctx context.Context, by string) context.Context {
	return context.WithValue(ctx, requestedByKey{}, by)
}

// RequestedByOf names who the calls of ctx are made for: the name
// WithRequestedBy set, or reconciliation itself.
func RequestedByOf(ctx context.Context) string {
	if by, _ := ctx.Value(requestedByKey{}).(string); by != "" {
		return by
	}
	return "reconciliation"
}

// Check is an order's convergence right now.
type Check struct {
	OrderID string
	// Converged: every service has reached what the order's state
	// requires (a business rejection is a final, agreed state).
	Converged bool
	// Mismatches are what is not converged yet; no action is taken.
	Mismatches []rec.Finding
	// Recorded is how many findings runs have recorded for the order.
	Recorded int
}

// ErrOrderNotFound is returned for an order the order service does not know.
var ErrOrderNotFound = errors.New("order not found")

// Check compares one order's facts now, without recording or acting: what
// the order snapshot shows as converged. Unlike a run, it counts messages
// still in an outbox within the deadline as not converged (IN_FLIGHT).
func (r *Reconciler) Check(ctx context.Context, orderID string) (Check, error) {
	if err := rules.ValidateID("orderId", orderID); err != nil {
		return Check{}, err
	}
	orders, err := r.peers.Orders(ctx, []string{orderID})
	if err != nil {
		return Check{}, err
	}
	if !orders[0].Found {
		return Check{}, fmt.Errorf("%w: %s", ErrOrderNotFound, orderID)
	}
	facts, err := r.peers.Facts(ctx, orders)
	if err != nil {
		return Check{}, err
	}
	mismatches := rec.Compare(facts[0], r.now().Add(-r.cfg.Deadline))
	if len(rec.VersionRegressions(facts[0].Order, facts[0])) > 0 {
		// Read the order again, after its consumers: one that moved on
		// between the reads is not a regression.
		again, err := r.peers.Orders(ctx, []string{orderID})
		if err != nil {
			return Check{}, err
		}
		if regressed := rec.VersionRegressions(again[0], facts[0]); len(regressed) > 0 {
			mismatches = regressed
		}
	}
	mismatches = append(mismatches, rec.InFlightNow(facts[0], r.now().Add(-r.cfg.Deadline))...)
	recorded, err := r.audit.FindingCount(ctx, orderID)
	if err != nil {
		return Check{}, err
	}
	return Check{OrderID: orderID, Converged: rec.Converged(mismatches), Mismatches: mismatches, Recorded: recorded}, nil
}
