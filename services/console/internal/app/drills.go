package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/drill"
)

// The states of a DrillRun.
const (
	DrillQueued    = "QUEUED"
	DrillRunning   = "RUNNING"
	DrillDone      = "DONE"
	DrillCancelled = "CANCELLED"
)

// DrillRun is one press of a drill's run button: the cases it selected
// and, as they end, their verdicts.
type DrillRun struct {
	ID int `json:"id"`
	// Selection is what was asked for: a drill, a case, or "all".
	Selection string `json:"selection"`
	// Operator is who asked.
	Operator   string        `json:"operator"`
	Status     string        `json:"status"`
	StartedAt  time.Time     `json:"startedAt"`
	FinishedAt *time.Time    `json:"finishedAt,omitempty"`
	Cases      []string      `json:"cases"`
	Current    string        `json:"current,omitempty"`
	Results    []DrillResult `json:"results"`
	// Controlled says the crash and outage cases had the runner's control
	// API; without it they are skipped.
	Controlled bool `json:"controlled"`
}

// DrillResult is one case's verdict (drill.Result).
type DrillResult struct {
	Case     string `json:"case"`
	Verdict  string `json:"verdict"`
	Expected string `json:"expected"`
	Seen     string `json:"seen"`
	// ConvergenceMs is how long the suite took to converge.
	ConvergenceMs int64 `json:"convergenceMs"`
}

// DrillCase is a case the page offers.
type DrillCase struct {
	Name  string `json:"name"`
	Drill string `json:"drill"`
}

// Errors of Start.
var (
	// ErrDrillRunning refuses a run while another is queued or running:
	// the cases share the suite, one at a time.
	ErrDrillRunning = errors.New("a drill run is in progress")
	// ErrUnknownDrill is a name that is neither a drill, a case nor all.
	ErrUnknownDrill = drill.ErrUnknownDrill
)

// DrillsConfig is the suite the drills run against.
type DrillsConfig struct {
	// Target is the suite, without a Controller or a run id: each run
	// gets a fresh run id, and the control API's client when it answers.
	Target drill.Target
	// Control is the runner's control API; nil without one.
	Control ControlChecker
	// Keep is how many finished runs the page shows.
	Keep int
	// Cases are the cases offered, in order; nil: every case of
	// scripts/drill.
	Cases []drill.Case
}

// ControlChecker is a drill controller whose list of services says whether
// its control API answers; *controlapi.Client is one.
type ControlChecker interface {
	drill.Controller
	Services(ctx context.Context) ([]controlapi.ServiceView, error)
}

// Drills runs the tutorial's drills (scripts/drill) one run at a time
// and keeps the last runs' verdicts.
type Drills struct {
	cfg    DrillsConfig
	logger *slog.Logger
	queue  chan *DrillRun
	now    func() time.Time

	mu   sync.Mutex
	runs []*DrillRun
	next int
}

// NewDrills returns the drills of cfg's suite; Run runs what Start asks.
func NewDrills(cfg DrillsConfig, logger *slog.Logger) *Drills {
	if cfg.Keep <= 0 {
		cfg.Keep = 10
	}
	if cfg.Cases == nil {
		cfg.Cases = drill.Cases()
	}
	return &Drills{cfg: cfg, logger: logger, queue: make(chan *DrillRun, 1), now: time.Now, next: 1}
}

// pick returns the cases of selection: "all", a drill or a case, as
// scripts/drill selects them.
func (d *Drills) pick(selection string) ([]drill.Case, error) {
	return drill.SelectFrom(d.cfg.Cases, selection)
}

// Catalog lists the drills in the tutorial's order and their cases.
func (d *Drills) Catalog() []DrillCase {
	var out []DrillCase
	for _, c := range d.cfg.Cases {
		out = append(out, DrillCase{Name: c.Name, Drill: c.Drill})
	}
	return out
}

// Start queues a run of selection (a drill, a case or "all") in the name
// of operator. It refuses while another run is queued or running.
func (d *Drills) Start(selection, operator string) (DrillRun, error) {
	cases, err := d.pick(selection)
	if err != nil {
		return DrillRun{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		if r.Status == DrillQueued || r.Status == DrillRunning {
			return DrillRun{}, fmt.Errorf("%w: run %d (%s)", ErrDrillRunning, r.ID, r.Selection)
		}
	}
	run := &DrillRun{ID: d.next, Selection: selection, Operator: operator, Status: DrillQueued, StartedAt: d.now().UTC(), Results: []DrillResult{}}
	for _, c := range cases {
		run.Cases = append(run.Cases, c.Name)
	}
	d.next++
	d.runs = append(d.runs, run)
	if over := len(d.runs) - d.cfg.Keep; over > 0 {
		d.runs = d.runs[over:]
	}
	d.queue <- run // room for one: nothing else is queued
	d.logger.Info("drill run requested", "run", run.ID, "selection", selection, "operator", operator)
	return *run, nil
}

// Runs returns the kept runs, newest first.
func (d *Drills) Runs() []DrillRun {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]DrillRun, 0, len(d.runs))
	for i := len(d.runs) - 1; i >= 0; i-- {
		out = append(out, d.copyOf(d.runs[i]))
	}
	return out
}

// Get returns run id; false when it is not kept.
func (d *Drills) Get(id int) (DrillRun, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runs {
		if r.ID == id {
			return d.copyOf(r), true
		}
	}
	return DrillRun{}, false
}

func (d *Drills) copyOf(r *DrillRun) DrillRun {
	c := *r
	c.Results = slices.Clone(r.Results)
	c.Cases = slices.Clone(r.Cases)
	return c
}

// Run runs the queued runs one after the other until ctx ends; a run in
// progress then ends CANCELLED.
func (d *Drills) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case run := <-d.queue:
			d.execute(ctx, run)
		}
	}
}

func (d *Drills) execute(ctx context.Context, run *DrillRun) {
	cases, err := d.pick(run.Selection)
	t := d.cfg.Target
	t.RunID = drill.NewRunID()
	controlled := false
	if d.cfg.Control != nil {
		if _, err := d.cfg.Control.Services(ctx); err == nil {
			t.Controller, controlled = d.cfg.Control, true
		}
	}
	d.update(run, func(r *DrillRun) { r.Status, r.Controlled = DrillRunning, controlled })
	for _, c := range cases {
		if err != nil || ctx.Err() != nil {
			break
		}
		d.update(run, func(r *DrillRun) { r.Current = c.Name })
		res := drill.Run(ctx, t, []drill.Case{c}, nil)[0]
		d.update(run, func(r *DrillRun) {
			r.Results = append(r.Results, DrillResult{Case: res.Case, Verdict: res.Verdict(), Expected: res.Expected, Seen: res.Seen,
				ConvergenceMs: res.Convergence.Milliseconds()})
		})
	}
	status := DrillDone
	if ctx.Err() != nil {
		status = DrillCancelled
	}
	finished := d.now().UTC()
	d.update(run, func(r *DrillRun) { r.Status, r.Current, r.FinishedAt = status, "", &finished })
	d.logger.Info("drill run finished", "run", run.ID, "selection", run.Selection, "status", status)
}

func (d *Drills) update(run *DrillRun, f func(*DrillRun)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(run)
}
