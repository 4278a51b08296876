// Package reconciliationapi is the reconciliation service's HTTP
// contract: the bodies its routes take and the answers they give. The
// handlers decode and answer these types, the service's OpenAPI document
// is reflected from them, and the service's clients (the console,
// scripts/suiteapi, the tests) decode with them (docs/decisions.md, The
// HTTP contract is generated from the handlers' types). It imports no
// internal package of the service.
package reconciliationapi

import "time"

// RunRequest is the optional body of POST /admin/reconciliation/runs.
type RunRequest struct {
	OrderIDs []string `json:"orderIds"`
	// MinAge is a Go duration ("0s", "30s"); empty: the convergence
	// deadline.
	MinAge string `json:"minAge"`
}

// FindingView is a finding as the API shows it.
type FindingView struct {
	RunID      int64     `json:"runId"`
	OrderID    string    `json:"orderId"`
	Kind       string    `json:"kind"`
	Service    string    `json:"service"`
	Expected   string    `json:"expected"`
	Actual     string    `json:"actual"`
	Action     string    `json:"action"`
	Outcome    string    `json:"outcome"`
	DetectedAt time.Time `json:"detectedAt"`
}

// RunView answers a run: while it is RUNNING, Phase, Checked, Actions,
// Findings and OrphanScan are how far it has got.
type RunView struct {
	ID         int64         `json:"id"`
	Status     string        `json:"status"`
	StartedBy  string        `json:"startedBy"`
	StartedAt  time.Time     `json:"startedAt"`
	FinishedAt *time.Time    `json:"finishedAt"`
	OrderIDs   []string      `json:"orderIds"`
	MinAge     string        `json:"minAge"`
	Checked    int           `json:"checked"`
	Actions    int           `json:"actions"`
	Error      string        `json:"error,omitempty"`
	Findings   []FindingView `json:"findings"`
	// InFlight are the orders asked for by id that were not compared:
	// their last change is younger than minAge.
	InFlight []string `json:"inFlight"`
	// Phase is the part of the run going on (or the last it reached):
	// COMPARING, then, for a run over every order, ORPHANS.
	Phase string `json:"phase"`
	// Phases are when each phase the run reached began and ended
	// (finishedAt null while it goes on).
	Phases []PhaseView `json:"phases"`
	// OrphanScan is how far the orphan pass has read each consumer's
	// orders; empty before it.
	OrphanScan []OrphanScanView `json:"orphanScan"`
}

// PhaseView is when a phase of a run began and ended.
type PhaseView struct {
	Phase      string     `json:"phase"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
}

// OrphanScanView is how far the orphan pass has read one consumer's list
// of the orders it holds effects for: pages and order ids read (each
// looked up at the order service), orphans named, and whether the list
// was read to its end (or the run named as many orphans as it may).
type OrphanScanView struct {
	Service string `json:"service"`
	Pages   int    `json:"pages"`
	Orders  int    `json:"orders"`
	Orphans int    `json:"orphans"`
	Done    bool   `json:"done"`
}

// RunsView answers GET /admin/reconciliation/runs.
type RunsView struct {
	Runs []RunSummary `json:"runs"`
}

// RunSummary is a run without its findings.
type RunSummary struct {
	ID         int64      `json:"id"`
	Status     string     `json:"status"`
	StartedBy  string     `json:"startedBy"`
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	Checked    int        `json:"checked"`
	Findings   int        `json:"findings"`
	Actions    int        `json:"actions"`
	Error      string     `json:"error,omitempty"`
	// Phase is the part of the run going on, or the last it reached.
	Phase string `json:"phase"`
}

// FindingsView answers GET /admin/reconciliation/findings?orderId=.
type FindingsView struct {
	OrderID  string        `json:"orderId"`
	Count    int           `json:"count"`
	Findings []FindingView `json:"findings"`
}

// CheckView answers GET /admin/reconciliation/orders/{id}: whether every
// service has caught up with the order now, what has not, and how many
// findings runs recorded for it.
type CheckView struct {
	OrderID    string         `json:"orderId"`
	Converged  bool           `json:"converged"`
	Findings   int            `json:"findings"`
	Mismatches []MismatchView `json:"mismatches"`
}

// MismatchView is what a service has not caught up with.
type MismatchView struct {
	Kind     string `json:"kind"`
	Service  string `json:"service"`
	Expected string `json:"expected"`
	Actual   string `json:"actual"`
}
