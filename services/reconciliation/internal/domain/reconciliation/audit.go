package reconciliation

import "time"

// RunStatus is where a run stands.
type RunStatus string

// The run statuses.
const (
	RunRunning   RunStatus = "RUNNING"
	RunSucceeded RunStatus = "SUCCEEDED"
	RunFailed    RunStatus = "FAILED"
)

// Scope is what a run checks: the orders named, or (none named) every order;
// either way only those whose last change is older than MinAge (zero:
// every one, now).
type Scope struct {
	OrderIDs []string
	MinAge   time.Duration
}

// Run is one reconciliation run as audited.
type Run struct {
	ID         int64
	StartedBy  string
	Scope      Scope
	Status     RunStatus
	StartedAt  time.Time
	FinishedAt *time.Time
	Checked    int
	Actions    int
	Error      string
	Findings   []Recorded
	// InFlight are the orders named in the scope that were not compared:
	// their last change was younger than MinAge.
	InFlight []string
	// Phase is the part of the run going on, or the last one it reached.
	Phase Phase
	// OrphansStartedAt is when the orphan pass began; nil before it, and
	// for a run over orders named by id, which has none.
	OrphansStartedAt *time.Time
	// OrphanScans are how far the orphan pass has read each consumer's
	// orders, in the order it reads them.
	OrphanScans []OrphanScan
}

// Phase is a part of a run.
type Phase string

// The phases of a run, in the order it goes through them.
const (
	// PhaseComparing compares each order's facts across the services
	// (and, for orders named by id that the order service does not know,
	// names the services holding their effects).
	PhaseComparing Phase = "COMPARING"
	// PhaseOrphans pages each consumer's orders it holds effects for and
	// looks them up at the order service: a run over every order only.
	PhaseOrphans Phase = "ORPHANS"
)

// OrphanScan is how far a run's orphan pass has read one consumer's list
// of the orders it holds effects for.
type OrphanScan struct {
	Service string
	// Pages are the pages of order ids read from the service.
	Pages int
	// Orders are the order ids read, each looked up at the order service.
	Orders int
	// Orphans are the ORPHAN_EFFECT findings named for the service.
	Orphans int
	// Done: the list was read to its end, or the run named as many
	// orphans for the service as it may.
	Done bool
}

// Span is when one phase of a run began and ended; FinishedAt is nil while
// the phase goes on.
type Span struct {
	Phase      Phase
	StartedAt  time.Time
	FinishedAt *time.Time
}

// Phases are the spans of the phases the run has reached: comparing from
// its start until the orphan pass began (or the run ended), then the
// orphan pass until the run ended.
func (r Run) Phases() []Span {
	compare := Span{Phase: PhaseComparing, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	if r.OrphansStartedAt == nil {
		return []Span{compare}
	}
	compare.FinishedAt = r.OrphansStartedAt
	return []Span{compare, {Phase: PhaseOrphans, StartedAt: *r.OrphansStartedAt, FinishedAt: r.FinishedAt}}
}

// Recorded is a finding as a run recorded it: the decided action and what
// became of it.
type Recorded struct {
	RunID      int64
	OrderID    string
	Kind       Kind
	Service    string
	Expected   string
	Actual     string
	Action     ActionType
	ActionKey  string
	Outcome    string
	DetectedAt time.Time
}

// ActionStatus is where a compensation stands.
type ActionStatus string

// The action statuses.
const (
	ActionInProgress ActionStatus = "IN_PROGRESS"
	ActionDone       ActionStatus = "DONE"
	ActionFailed     ActionStatus = "FAILED"
)

// Taken is a compensation as audited: taken once per key.
type Taken struct {
	Key         string
	RunID       int64
	OrderID     string
	Service     string
	Action      ActionType
	Status      ActionStatus
	Outcome     string
	Attempts    int
	RequestedBy string
	StartedAt   time.Time
	FinishedAt  *time.Time
}
