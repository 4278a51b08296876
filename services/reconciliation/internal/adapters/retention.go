package adapters

import (
	"time"

	"github.com/reliable-orders/fulfillment/pkg/retention"
)

// DefaultRunRetention is how long a finished run and its findings are
// kept: a month of history for whoever asks what reconciliation saw.
const DefaultRunRetention = 30 * 24 * time.Hour

// RetentionRules delete finished runs older than keep: first their
// findings, a batch at a time, then the runs left without findings. A run
// that took an action stays, with the action: reconciliation_actions is
// the record that keeps a compensation from being taken twice, and it is
// never deleted (it grows with compensations, not with runs). RUNNING
// runs stay, however old.
func RetentionRules(keep time.Duration) []retention.Rule {
	return []retention.Rule{
		{Table: "reconciliation_findings", Keep: keep, Delete: `
			DELETE FROM reconciliation_findings WHERE id = ANY(ARRAY(
				SELECT f.id FROM reconciliation_findings f
				JOIN reconciliation_runs r ON r.id = f.run_id
				WHERE r.status <> 'RUNNING' AND r.finished_at <= $1
				  AND NOT EXISTS (SELECT 1 FROM reconciliation_actions a WHERE a.run_id = r.id)
				LIMIT $2 FOR UPDATE OF f SKIP LOCKED))`},
		{Table: "reconciliation_runs", Keep: keep, Delete: `
			DELETE FROM reconciliation_runs WHERE id = ANY(ARRAY(
				SELECT r.id FROM reconciliation_runs r
				WHERE r.status <> 'RUNNING' AND r.finished_at <= $1
				  AND NOT EXISTS (SELECT 1 FROM reconciliation_findings f WHERE f.run_id = r.id)
				  AND NOT EXISTS (SELECT 1 FROM reconciliation_actions a WHERE a.run_id = r.id)
				LIMIT $2 FOR UPDATE SKIP LOCKED))`},
	}
}
