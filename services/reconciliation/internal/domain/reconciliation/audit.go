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
