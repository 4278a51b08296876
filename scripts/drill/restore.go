package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	// The Postgres driver, for the cases that play a restored backup.
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// The restore cases: a service's database restored from a backup taken
// before some of its changes. Each writes a database as the fault itself,
// never as the repair, which reconciliation makes through the services'
// APIs.

// database returns the database URL of service, or a skip.
func (s *session) database(service string) string {
	dsn := s.t.Databases[service]
	if dsn == "" {
		check(skip("no database URL of " + service + " to play a restored backup on"))
	}
	return dsn
}

// RestoreBackup plays a restore of the inventory service's database (at
// dsn) from a backup taken before the order was paid: the order's rows are
// gone (its stock movements and record, its dedup rows, its version guard)
// and its stock is back as it was. It plays the fault, never the repair,
// which reconciliation makes through the services' APIs.
func RestoreBackup(ctx context.Context, dsn, service, orderID string, eventIDs []string) error {
	if service != Inventory {
		return fmt.Errorf("a restored backup is played on inventory only, not %s", service)
	}
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	consumer := service + "-service"
	return postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE stock s SET available = s.available - m.delta, deducted = s.deducted + m.delta
			  FROM (SELECT sku, sum(delta) AS delta FROM stock_movements WHERE order_id = $1 GROUP BY sku) m
			  WHERE s.sku = m.sku`, []any{orderID}},
			{`DELETE FROM stock_movements WHERE order_id = $1`, []any{orderID}},
			{`DELETE FROM inventory_orders WHERE order_id = $1`, []any{orderID}},
			{`DELETE FROM aggregate_versions WHERE consumer = $1 AND aggregate_id = $2`, []any{consumer, orderID}},
			{`DELETE FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`, []any{consumer, pq.Array(eventIDs)}},
		} {
			if _, err := tx.ExecContext(ctx, stmt.sql, stmt.args...); err != nil {
				return fmt.Errorf("restore %s: %w", service, err)
			}
		}
		return nil
	})
}

// Backup is a dump of one database in pg_dump's custom format, in a
// directory of its own.
type Backup struct {
	dir, file string
}

// BackUp dumps the database at dsn with pg_dump -Fc, as an operator's
// backup does: one consistent snapshot of every table.
func BackUp(ctx context.Context, dsn string) (Backup, error) {
	dir, err := os.MkdirTemp("", "drill-backup-")
	if err != nil {
		return Backup{}, err
	}
	b := Backup{dir: dir, file: filepath.Join(dir, "backup.dump")}
	if err := pgTool(ctx, "pg_dump", "--format=custom", "--file="+b.file, "--dbname="+dsn); err != nil {
		return Backup{}, errors.Join(err, b.Remove())
	}
	return b, nil
}

// Restore puts the database at dsn back as b holds it with pg_restore
// --clean --if-exists, in one transaction: every table dropped and
// recreated with the backup's rows. Nothing may use the database
// meanwhile: stop its service first.
func (b Backup) Restore(ctx context.Context, dsn string) error {
	return pgTool(ctx, "pg_restore", "--clean", "--if-exists", "--single-transaction", "--no-owner", "--no-privileges",
		"--dbname="+dsn, b.file)
}

// Remove deletes the backup.
func (b Backup) Remove() error { return os.RemoveAll(b.dir) }

// havePGTools reports whether pg_dump and pg_restore, the PostgreSQL
// client programs a restore drill runs, are on PATH, or a skip.
func havePGTools() error {
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			return skip(tool + " is not installed (apt-get install postgresql-client)")
		}
	}
	return nil
}

// pgTool runs a PostgreSQL client program and returns its output with its
// failure.
func pgTool(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// reconcileRestoreFromBackup: the order service's database is backed up
// with pg_dump once an order is paid; then that order is refunded and a
// second order paid; then the database is restored from the backup with
// pg_restore, the order service stopped meanwhile. Reconciliation runs
// before any traffic (the restore procedure of docs/decisions.md, A
// restore is fenced): it fences the refunded order, whose consumers are
// past the version it went back to, and names the second order, which the
// order service no longer knows, for a person. A refund of the fenced
// order then reaches every consumer; what the lost refund leaves (the
// payment and the customer's messages hold it, the order does not) is
// named for a person too.
func reconcileRestoreFromBackup(s *session) string {
	dsn := s.database(Order)
	check(havePGTools())
	s.stopper() // before the case touches the suite
	fenced := s.paidOrder("-fenced", refundQuantity, refundUnitPrice, refundStock)
	s.waitRelayed(fenced.id, 3)
	backup := must(BackUp(s.ctx, dsn))
	s.cleanup("remove the backup", func(context.Context) error { return backup.Remove() })

	// After the backup: the paid order is refunded (versions 4 and 5,
	// which the consumers apply), and a second order is paid.
	s.refund(fenced.id, "PARTIALLY_REFUNDED", 5, refundBody{Amount: "10.00"})
	s.waitEffects(fenced.id, "DEDUCTED", 2, 2)
	orphan := s.paidOrder("-orphan", 1, "10.00", 10).id
	s.waitConverged(fenced.id)
	s.waitConverged(orphan)

	// Nothing may use the database while it is restored; the order
	// service starts again also when the restore fails.
	checkf(errOf(s.stopper().Stop(s.ctx, Order)), "stop the order service")
	startAgain := s.cleanup("start the order service again", s.startUsual(Order))
	check(backup.Restore(s.ctx, dsn))
	startAgain()
	s.orderIs(fenced.id, "PAID", 3, "after the restore, as backed up,")
	if _, err := s.api.Order(s.ctx, orphan); !suiteapi.IsStatus(err, 404) {
		fail("after the restore the order service answers %v for %s; want 404, the order is not in the backup", err, orphan)
	}

	// Before traffic: a run over the case's orders. The procedure's run is
	// over every order; on a suite other drills share, that one also
	// meets their orders and their synthetic orphans, and names at most
	// 100 orphans a service, so it might not reach this case's.
	start := time.Now()
	r := runView(must(s.api.Reconcile(s.ctx, "drill "+s.t.RunID+" "+s.slug, fenced.id, orphan)))
	took := time.Since(start)
	regressed, orphaned := restoreFindings(r.Findings, fenced.id, orphan)
	s.orderIs(fenced.id, "PAID", 5, "after the run (fenced at the highest version its consumers applied)")

	// The next change of the fenced order: a unit and 40.00 back. Every
	// consumer applies it: none ignores it as stale.
	s.refund(fenced.id, "PARTIALLY_REFUNDED", 7, refundBody{Amount: "40.00", Items: []refundLine{{SKU: fenced.sku, Quantity: 1}}})
	s.waitEffects(fenced.id, "PARTIALLY_RESTOCKED", 3, 3)
	s.converged = time.Since(start)
	st := s.refundStateOf(fenced)
	if st.order.RefundedAmount.String() != "40.00" || st.payment.Refunded != "50.00" || st.stock.Available != refundStock-1 || st.stock.Deducted != 1 ||
		ledgerPoints(st.effects.Ledger) != 40 {
		fail("%s, %d points; want order refunded 40.00, payment 50.00 (the lost 10.00 too), stock %d/1, 40 points",
			st, ledgerPoints(st.effects.Ledger), refundStock-1)
	}
	// What is left is the refund the restore lost, for a person: its two
	// findings.
	after, _ := s.reconcile([]string{fenced.id}, "AMOUNT_MISMATCH payment MANUAL_REVIEW", "EXTRA_EFFECT notification MANUAL_REVIEW")
	return fmt.Sprintf("pg_dump, then %s refunded and %s paid, pg_restore; the run before traffic in %s fenced %s at v5 "+
		"(%s regressed, one action) and named only %s for a person (ORPHAN_EFFECT at %s); the next refund reached every consumer: %s; "+
		"left for a person: the lost refund (%s)",
		fenced.id, orphan, took.Round(time.Millisecond), fenced.id, strings.Join(regressed, ", "), orphan, strings.Join(orphaned, ", "),
		st, after)
}

// restoreFindings checks the run's findings of the case's orders: every
// one of fenced is ORDER_VERSION_REGRESSED with its FENCE, taken once
// (DONE) and ALREADY_TAKEN for the other consumers; every one of orphan
// is ORPHAN_EFFECT for a person; nothing else. It returns the regressed
// consumers and the services holding the orphan's effects.
func restoreFindings(findings []suiteapi.Finding, fenced, orphan string) (regressed, orphaned []string) {
	done := 0
	for _, f := range findings {
		switch {
		case f.OrderID == fenced && f.Kind == "ORDER_VERSION_REGRESSED" && f.Action == "FENCE":
			regressed = append(regressed, f.Service)
			if strings.HasPrefix(f.Outcome, "DONE") {
				done++
			} else if !strings.HasPrefix(f.Outcome, "ALREADY_TAKEN") {
				fail("fence of %s for %s: %s; want DONE once, ALREADY_TAKEN for the others", fenced, f.Service, f.Outcome)
			}
		case f.OrderID == orphan && f.Kind == "ORPHAN_EFFECT" && f.Action == "MANUAL_REVIEW":
			orphaned = append(orphaned, f.Service)
		default:
			fail("finding %s %s %s %s (%s); want only the FENCE of %s and ORPHAN_EFFECT of %s",
				f.OrderID, f.Kind, f.Service, f.Action, f.Outcome, fenced, orphan)
		}
	}
	for _, c := range consumers {
		if !slices.Contains(regressed, c) {
			fail("regressed at %v: want %s among them (it applied the lost refund)", regressed, c)
		}
	}
	for _, c := range append([]string{Payment}, consumers...) {
		if !slices.Contains(orphaned, c) {
			fail("orphan effects at %v: want %s among them (it holds effects of the order the restore lost)", orphaned, c)
		}
	}
	if done != 1 {
		fail("%d fences of %s taken, want 1", done, fenced)
	}
	return regressed, orphaned
}
