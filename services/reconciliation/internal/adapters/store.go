package adapters

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// Store keeps reconciliation's audit (runs, findings, actions) and the
// convergence monitor's state in the service's own database.
type Store struct {
	db *sqlx.DB
}

// NewStore returns a store over db.
func NewStore(db *sqlx.DB) *Store { return &Store{db: db} }

// StartRun records a run that begins now, RUNNING, or returns
// app.ErrRunInProgress naming the run that is: the partial unique index on
// RUNNING runs decides between two processes starting at once.
func (s *Store) StartRun(ctx context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	ids := scope.OrderIDs
	if ids == nil {
		ids = []string{}
	}
	run := rec.Run{StartedBy: startedBy, Scope: scope, Status: rec.RunRunning, Phase: rec.PhaseComparing}
	// The running run may finish between the insert and the read of it;
	// the next insert then succeeds.
	for range 3 {
		err := s.db.QueryRowxContext(ctx, `
			INSERT INTO reconciliation_runs (started_by, order_ids, min_age_ms, status)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING id, started_at`,
			startedBy, pq.Array(ids), scope.MinAge.Milliseconds(), rec.RunRunning).Scan(&run.ID, &run.StartedAt)
		if err == nil {
			return run, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return rec.Run{}, fmt.Errorf("start run: %w", err)
		}
		var running int64
		err = s.db.GetContext(ctx, &running, `SELECT id FROM reconciliation_runs WHERE status = 'RUNNING'`)
		if err == nil {
			return rec.Run{}, fmt.Errorf("%w: run %d is running (GET /admin/reconciliation/runs/%d); one runs at a time",
				app.ErrRunInProgress, running, running)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return rec.Run{}, fmt.Errorf("read the running run: %w", err)
		}
	}
	return rec.Run{}, fmt.Errorf("%w: runs keep starting and finishing; try again", app.ErrRunInProgress)
}

// Progress records how far a RUNNING run has got (its counts, its phase
// and its orphan pass's reads), and that its process is alive. The orphan
// pass's start is the database's time, as the run's start and end are.
func (s *Store) Progress(ctx context.Context, run rec.Run) error {
	scans, err := orphanScansJSON(run.OrphanScans)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `
		UPDATE reconciliation_runs
		SET checked = $2, findings = $3, actions = $4, heartbeat_at = now(), phase = $5, orphan_scan = $6,
		    orphans_started_at = CASE WHEN $5 = 'ORPHANS' THEN coalesce(orphans_started_at, now()) END
		WHERE id = $1 AND status = 'RUNNING'`,
		run.ID, run.Checked, len(run.Findings), run.Actions, phaseOf(run), scans); err != nil {
		return fmt.Errorf("record progress of run %d: %w", run.ID, err)
	}
	return nil
}

// orphanScan is an OrphanScan as orphan_scan stores it.
type orphanScan struct {
	Service string `json:"service"`
	Pages   int    `json:"pages"`
	Orders  int    `json:"orders"`
	Orphans int    `json:"orphans"`
	Done    bool   `json:"done"`
}

// orphanScansJSON encodes scans for orphan_scan, as text: lib/pq sends
// []byte as bytea.
func orphanScansJSON(scans []rec.OrphanScan) (string, error) {
	out := make([]orphanScan, len(scans))
	for i, sc := range scans {
		out[i] = orphanScan(sc)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return "", fmt.Errorf("encode orphan scans: %w", err)
	}
	return string(raw), nil
}

// phaseOf is the phase a run records: a run recorded before phases were
// has none, and was comparing.
func phaseOf(run rec.Run) rec.Phase {
	if run.Phase == "" {
		return rec.PhaseComparing
	}
	return run.Phase
}

// Beat records that the process running run id is alive.
func (s *Store) Beat(ctx context.Context, id int64) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE reconciliation_runs SET heartbeat_at = now() WHERE id = $1 AND status = 'RUNNING'`, id); err != nil {
		return fmt.Errorf("heartbeat of run %d: %w", id, err)
	}
	return nil
}

// Abandon marks FAILED every RUNNING run whose last heartbeat is before
// before (its process died mid-run) and returns their ids.
func (s *Store) Abandon(ctx context.Context, before time.Time) ([]int64, error) {
	var ids []int64
	if err := s.db.SelectContext(ctx, &ids, `
		UPDATE reconciliation_runs
		SET status = 'FAILED', finished_at = now(),
		    error = 'abandoned: no heartbeat since ' || to_char(heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') ||
		            '; the process running it stopped before the run finished'
		WHERE status = 'RUNNING' AND heartbeat_at < $1
		RETURNING id`, before); err != nil {
		return nil, fmt.Errorf("mark abandoned runs: %w", err)
	}
	return ids, nil
}

// FinishRun records how run ended.
func (s *Store) FinishRun(ctx context.Context, run rec.Run) error {
	inFlight := run.InFlight
	if inFlight == nil {
		inFlight = []string{}
	}
	scans, err := orphanScansJSON(run.OrphanScans)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `
		UPDATE reconciliation_runs
		SET status = $2, finished_at = now(), checked = $3, findings = $4, actions = $5, error = $6, in_flight = $7,
		    phase = $8, orphan_scan = $9,
		    orphans_started_at = CASE WHEN $8 = 'ORPHANS' THEN coalesce(orphans_started_at, now()) END
		WHERE id = $1`,
		run.ID, run.Status, run.Checked, len(run.Findings), run.Actions, run.Error, pq.Array(inFlight),
		phaseOf(run), scans); err != nil {
		return fmt.Errorf("finish run %d: %w", run.ID, err)
	}
	return nil
}

// AddFindings records findings of a run in one statement.
func (s *Store) AddFindings(ctx context.Context, runID int64, fs []rec.Recorded) error {
	if len(fs) == 0 {
		return nil
	}
	cols := make([][]string, 8)
	for _, f := range fs {
		for i, v := range []string{f.OrderID, string(f.Kind), f.Service, f.Expected, f.Actual, string(f.Action), f.ActionKey, f.Outcome} {
			cols[i] = append(cols[i], v)
		}
	}
	if _, err := s.db.ExecContext(ctx, `
		INSERT INTO reconciliation_findings (run_id, order_id, kind, service, expected, actual, action, action_key, outcome)
		SELECT $1, * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[])`,
		runID, pq.Array(cols[0]), pq.Array(cols[1]), pq.Array(cols[2]), pq.Array(cols[3]), pq.Array(cols[4]),
		pq.Array(cols[5]), pq.Array(cols[6]), pq.Array(cols[7])); err != nil {
		return fmt.Errorf("record %d findings of run %d: %w", len(fs), runID, err)
	}
	return nil
}

type runRow struct {
	ID         int64          `db:"id"`
	StartedBy  string         `db:"started_by"`
	OrderIDs   pq.StringArray `db:"order_ids"`
	MinAgeMS   int64          `db:"min_age_ms"`
	Status     string         `db:"status"`
	StartedAt  time.Time      `db:"started_at"`
	FinishedAt *time.Time     `db:"finished_at"`
	Checked    int            `db:"checked"`
	Findings   int            `db:"findings"`
	Actions    int            `db:"actions"`
	Error      string         `db:"error"`
	InFlight   pq.StringArray `db:"in_flight"`
	Phase      string         `db:"phase"`
	// OrphansStartedAt is null before the orphan pass.
	OrphansStartedAt *time.Time `db:"orphans_started_at"`
	OrphanScan       []byte     `db:"orphan_scan"`
}

func (r runRow) run() (rec.Run, error) {
	var scans []orphanScan
	if err := json.Unmarshal(r.OrphanScan, &scans); err != nil {
		return rec.Run{}, fmt.Errorf("decode the orphan scans of run %d: %w", r.ID, err)
	}
	run := rec.Run{ID: r.ID, StartedBy: r.StartedBy, Scope: rec.Scope{OrderIDs: r.OrderIDs, MinAge: time.Duration(r.MinAgeMS) * time.Millisecond},
		Status: rec.RunStatus(r.Status), StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Checked: r.Checked,
		Actions: r.Actions, Error: r.Error, InFlight: r.InFlight, Phase: rec.Phase(r.Phase), OrphansStartedAt: r.OrphansStartedAt,
		OrphanScans: make([]rec.OrphanScan, len(scans))}
	for i, sc := range scans {
		run.OrphanScans[i] = rec.OrphanScan(sc)
	}
	return run, nil
}

const runColumns = `id, started_by, order_ids, min_age_ms, status, started_at, finished_at, checked, findings, actions, error, in_flight,
	phase, orphans_started_at, orphan_scan`

// Run returns run id with its findings, or app.ErrRunNotFound.
func (s *Store) Run(ctx context.Context, id int64) (rec.Run, error) {
	var row runRow
	err := s.db.GetContext(ctx, &row, `SELECT `+runColumns+` FROM reconciliation_runs WHERE id = $1`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return rec.Run{}, fmt.Errorf("%w: %d", app.ErrRunNotFound, id)
	}
	if err != nil {
		return rec.Run{}, fmt.Errorf("read run %d: %w", id, err)
	}
	run, err := row.run()
	if err != nil {
		return rec.Run{}, err
	}
	if run.Findings, err = s.findings(ctx, `run_id = $1`, id); err != nil {
		return rec.Run{}, err
	}
	return run, nil
}

// Runs returns the latest runs, newest first, without their findings but
// with how many each had.
func (s *Store) Runs(ctx context.Context, limit int) ([]rec.Run, []int, error) {
	var rows []runRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+runColumns+` FROM reconciliation_runs ORDER BY id DESC LIMIT $1`, limit); err != nil {
		return nil, nil, fmt.Errorf("list runs: %w", err)
	}
	runs, counts := make([]rec.Run, len(rows)), make([]int, len(rows))
	for i, r := range rows {
		run, err := r.run()
		if err != nil {
			return nil, nil, err
		}
		runs[i], counts[i] = run, r.Findings
	}
	return runs, counts, nil
}

// Findings returns every finding recorded for an order, oldest first.
func (s *Store) Findings(ctx context.Context, orderID string) ([]rec.Recorded, error) {
	return s.findings(ctx, `order_id = $1`, orderID)
}

// FindingCount is how many findings runs have recorded for an order.
func (s *Store) FindingCount(ctx context.Context, orderID string) (int, error) {
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM reconciliation_findings WHERE order_id = $1`, orderID); err != nil {
		return 0, fmt.Errorf("count findings of %s: %w", orderID, err)
	}
	return n, nil
}

type findingRow struct {
	RunID      int64     `db:"run_id"`
	OrderID    string    `db:"order_id"`
	Kind       string    `db:"kind"`
	Service    string    `db:"service"`
	Expected   string    `db:"expected"`
	Actual     string    `db:"actual"`
	Action     string    `db:"action"`
	ActionKey  string    `db:"action_key"`
	Outcome    string    `db:"outcome"`
	DetectedAt time.Time `db:"detected_at"`
}

func (s *Store) findings(ctx context.Context, where string, arg any) ([]rec.Recorded, error) {
	var rows []findingRow
	if err := s.db.SelectContext(ctx, &rows, `
		SELECT run_id, order_id, kind, service, expected, actual, action, action_key, outcome, detected_at
		FROM reconciliation_findings WHERE `+where+` ORDER BY id`, arg); err != nil {
		return nil, fmt.Errorf("read findings: %w", err)
	}
	out := make([]rec.Recorded, len(rows))
	for i, r := range rows {
		out[i] = rec.Recorded{RunID: r.RunID, OrderID: r.OrderID, Kind: rec.Kind(r.Kind), Service: r.Service, Expected: r.Expected,
			Actual: r.Actual, Action: rec.ActionType(r.Action), ActionKey: r.ActionKey, Outcome: r.Outcome, DetectedAt: r.DetectedAt}
	}
	return out, nil
}

type takenRow struct {
	Key         string     `db:"action_key"`
	RunID       int64      `db:"run_id"`
	OrderID     string     `db:"order_id"`
	Service     string     `db:"service"`
	Action      string     `db:"action"`
	Status      string     `db:"status"`
	Outcome     string     `db:"outcome"`
	Attempts    int        `db:"attempts"`
	RequestedBy string     `db:"requested_by"`
	StartedAt   time.Time  `db:"started_at"`
	FinishedAt  *time.Time `db:"finished_at"`
}

func (r takenRow) taken() rec.Taken {
	return rec.Taken{Key: r.Key, RunID: r.RunID, OrderID: r.OrderID, Service: r.Service, Action: rec.ActionType(r.Action),
		Status: rec.ActionStatus(r.Status), Outcome: r.Outcome, Attempts: r.Attempts, RequestedBy: r.RequestedBy,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
}

const takenColumns = `action_key, run_id, order_id, service, action, status, outcome, attempts, requested_by, started_at, finished_at`

// Claim takes the action of key for run, unless it is taken already: it
// returns claimed = true when this run is to take it (a new key; or a
// failed one, or one left in progress by a crash longer ago than stale,
// with attempts left below maxAttempts), and otherwise the action as
// recorded. Two runs at once cannot both claim a key: the insert and the
// conditional update decide it in the database.
func (s *Store) Claim(ctx context.Context, a rec.Taken, stale time.Duration, maxAttempts int) (bool, rec.Taken, error) {
	var row takenRow
	err := s.db.GetContext(ctx, &row, `
		INSERT INTO reconciliation_actions (action_key, run_id, order_id, service, action, status, requested_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (action_key) DO UPDATE
		SET status = EXCLUDED.status, run_id = EXCLUDED.run_id, requested_by = EXCLUDED.requested_by,
		    attempts = reconciliation_actions.attempts + 1, started_at = now(), finished_at = NULL
		WHERE reconciliation_actions.attempts < $8
		  AND (reconciliation_actions.status = 'FAILED'
		       OR (reconciliation_actions.status = 'IN_PROGRESS' AND reconciliation_actions.started_at < now() - make_interval(secs => $9)))
		RETURNING `+takenColumns,
		a.Key, a.RunID, a.OrderID, a.Service, a.Action, rec.ActionInProgress, a.RequestedBy, maxAttempts, stale.Seconds())
	if err == nil {
		return true, row.taken(), nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return false, rec.Taken{}, fmt.Errorf("claim action %s: %w", a.Key, err)
	}
	if err := s.db.GetContext(ctx, &row, `SELECT `+takenColumns+` FROM reconciliation_actions WHERE action_key = $1`, a.Key); err != nil {
		return false, rec.Taken{}, fmt.Errorf("read action %s: %w", a.Key, err)
	}
	return false, row.taken(), nil
}

// Finish records what became of a claimed action.
func (s *Store) Finish(ctx context.Context, key string, status rec.ActionStatus, outcome string) error {
	if _, err := s.db.ExecContext(ctx, `
		UPDATE reconciliation_actions SET status = $2, outcome = $3, finished_at = now() WHERE action_key = $1`,
		key, status, outcome); err != nil {
		return fmt.Errorf("finish action %s: %w", key, err)
	}
	return nil
}

// Cursor returns how far the monitor has read the orders' changes.
func (s *Store) Cursor(ctx context.Context) (app.Cursor, error) {
	var c struct {
		ChangedAfter time.Time `db:"changed_after"`
		AfterID      string    `db:"after_id"`
	}
	err := s.db.GetContext(ctx, &c, `SELECT changed_after, after_id FROM convergence_cursor WHERE id = 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return app.Cursor{}, nil
	}
	if err != nil {
		return app.Cursor{}, fmt.Errorf("read convergence cursor: %w", err)
	}
	return app.Cursor{ChangedAfter: c.ChangedAfter, AfterID: c.AfterID}, nil
}

// SaveCursor records how far the monitor has read.
func (s *Store) SaveCursor(ctx context.Context, c app.Cursor) error {
	if _, err := s.db.ExecContext(ctx, `
		INSERT INTO convergence_cursor (id, changed_after, after_id) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET changed_after = EXCLUDED.changed_after, after_id = EXCLUDED.after_id`,
		c.ChangedAfter, c.AfterID); err != nil {
		return fmt.Errorf("save convergence cursor: %w", err)
	}
	return nil
}

// Watch records orders' latest versions, in one statement: a new version
// starts a new convergence (converged_at cleared), an older or equal one
// changes nothing.
func (s *Store) Watch(ctx context.Context, orders []rec.Order) error {
	if len(orders) == 0 {
		return nil
	}
	ids, versions, changed := make([]string, len(orders)), make([]int64, len(orders)), make([]time.Time, len(orders))
	for i, o := range orders {
		ids[i], versions[i], changed[i] = o.ID, o.Version, o.UpdatedAt
	}
	if _, err := s.db.ExecContext(ctx, `
		INSERT INTO convergence_watch (order_id, version, changed_at)
		SELECT * FROM unnest($1::text[], $2::bigint[], $3::timestamptz[])
		ON CONFLICT (order_id) DO UPDATE
		SET version = EXCLUDED.version, changed_at = EXCLUDED.changed_at, converged_at = NULL
		WHERE convergence_watch.version < EXCLUDED.version`,
		pq.Array(ids), pq.Array(versions), pq.Array(changed)); err != nil {
		return fmt.Errorf("watch %d orders: %w", len(orders), err)
	}
	return nil
}

// Unconverged returns up to limit watched orders not yet converged, those
// never checked first, then those checked longest ago, and marks them
// checked now: a backlog larger than limit is checked in turn.
func (s *Store) Unconverged(ctx context.Context, limit int) ([]string, error) {
	var ids []string
	if err := s.db.SelectContext(ctx, &ids, `
		UPDATE convergence_watch SET checked_at = now()
		WHERE order_id IN (
			SELECT order_id FROM convergence_watch WHERE converged_at IS NULL
			ORDER BY checked_at NULLS FIRST, changed_at LIMIT $1)
		RETURNING order_id`, limit); err != nil {
		return nil, fmt.Errorf("list unconverged orders: %w", err)
	}
	return ids, nil
}

// Converged records that order id, at version, converged at at, and
// returns when it changed, with ok = true only for the call that recorded
// it (so each convergence is counted once, whoever else watches).
func (s *Store) Converged(ctx context.Context, id string, version int64, at time.Time) (changedAt time.Time, ok bool, err error) {
	err = s.db.GetContext(ctx, &changedAt, `
		UPDATE convergence_watch SET converged_at = greatest($3, changed_at)
		WHERE order_id = $1 AND version = $2 AND converged_at IS NULL
		RETURNING changed_at`, id, version, at)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("record convergence of %s: %w", id, err)
	}
	return changedAt, true, nil
}

// Past returns how many watched orders changed before cutoff and have not
// converged, and when the oldest of them changed.
func (s *Store) Past(ctx context.Context, cutoff time.Time) (int, *time.Time, error) {
	var row struct {
		N      int        `db:"n"`
		Oldest *time.Time `db:"oldest"`
	}
	if err := s.db.GetContext(ctx, &row, `
		SELECT count(*) AS n, min(changed_at) AS oldest FROM convergence_watch
		WHERE converged_at IS NULL AND changed_at < $1`, cutoff); err != nil {
		return 0, nil, fmt.Errorf("count unconverged orders: %w", err)
	}
	return row.N, row.Oldest, nil
}
