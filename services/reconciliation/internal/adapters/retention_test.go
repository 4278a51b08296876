package adapters_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/retention"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/adapters"
)

// TestRunRetention: finished runs older than the window go with their
// findings; newer runs, RUNNING runs and runs that took an action stay
// with theirs.
func TestRunRetention(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, postgres.MigrationSet{Name: "reconciliation", FS: os.DirFS("../../migrations")})
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	const day = 24 * time.Hour
	runs := []struct {
		by       string
		status   string
		ago      time.Duration
		findings int
		action   bool
	}{
		{"old", "SUCCEEDED", 40 * day, 3, false},
		{"old-failed", "FAILED", 31 * day, 0, false},
		{"old-acted", "SUCCEEDED", 40 * day, 1, true},
		{"old-running", "RUNNING", 40 * day, 1, false},
		{"new", "SUCCEEDED", 5 * day, 2, false},
	}
	for _, r := range runs {
		var id int64
		var finished any
		if r.status != "RUNNING" {
			finished = now.Add(-r.ago)
		}
		if err := db.Get(&id, `INSERT INTO reconciliation_runs (started_by, min_age_ms, status, started_at, finished_at)
			VALUES ($1, 0, $2, $3, $4) RETURNING id`, r.by, r.status, now.Add(-r.ago-time.Minute), finished); err != nil {
			t.Fatal(err)
		}
		for i := range r.findings {
			if _, err := db.Exec(`INSERT INTO reconciliation_findings (run_id, order_id, kind, service, expected, actual, action, outcome)
				VALUES ($1, $2, 'MISSING', 'points', 'x', 'y', 'NONE', 'NONE')`, id, fmt.Sprintf("O-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if r.action {
			if _, err := db.Exec(`INSERT INTO reconciliation_actions (action_key, run_id, order_id, service, action, status, requested_by)
				VALUES ($1, $2, 'O-0', 'points', 'REPUBLISH', 'DONE', 'schedule')`, "key-"+r.by, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := retention.New(db, retention.Config{Batch: 2, Now: func() time.Time { return now }}, prometheus.NewRegistry(),
		adapters.RetentionRules(30*day)...)
	deleted, err := p.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	if err := db.Select(&kept, `SELECT started_by || ':' || (SELECT count(*) FROM reconciliation_findings f WHERE f.run_id = r.id)
		FROM reconciliation_runs r ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(kept), "[old-acted:1 old-running:1 new:2]"; got != want {
		t.Errorf("kept runs:findings %s, want %s", got, want)
	}
	if deleted["reconciliation_findings"] != 3 || deleted["reconciliation_runs"] != 2 {
		t.Errorf("deleted %v, want 3 findings and 2 runs", deleted)
	}
}
