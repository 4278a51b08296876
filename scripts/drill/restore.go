package drill

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// orderTables are the order service's tables that hold an order's rows,
// parents first; each has the order's id in orderColumn.
var orderTables = []struct{ name, orderColumn string }{
	{"orders", "order_id"},
	{"order_refunds", "order_id"},
	{"processed_callbacks", "order_id"},
	{"outbox_events", "aggregate_id"},
}

// OrderBackup is every row the order service holds of one order, as a
// backup of its database taken at one moment holds them: one JSON array
// of rows a table.
type OrderBackup struct {
	OrderID string
	Rows    map[string]string
}

// BackUpOrder copies the order's rows out of the order service's database
// at dsn, in one snapshot.
func BackUpOrder(ctx context.Context, dsn, orderID string) (OrderBackup, error) {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return OrderBackup{}, err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return OrderBackup{}, err
	}
	defer tx.Rollback() //nolint:errcheck // read only
	b := OrderBackup{OrderID: orderID, Rows: map[string]string{}}
	for _, t := range orderTables {
		var rows string
		// The table and column names are the constants above.
		q := fmt.Sprintf(`SELECT coalesce(json_agg(t), '[]')::text FROM %s t WHERE %s = $1`, t.name, t.orderColumn)
		if err := tx.QueryRowContext(ctx, q, orderID).Scan(&rows); err != nil {
			return OrderBackup{}, fmt.Errorf("back up %s of %s: %w", t.name, orderID, err)
		}
		b.Rows[t.name] = rows
	}
	return b, tx.Commit()
}

// RestoreOrder puts the order's rows back as b holds them, in one
// transaction: what restoring the order service's database from that
// backup does to this order, without touching any other order of the
// suite. Like RestoreBackup it plays the fault (and, in the drill, the
// person's repair), never reconciliation's part.
func RestoreOrder(ctx context.Context, dsn string, b OrderBackup) error {
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	children := slices.Clone(orderTables)
	slices.Reverse(children)
	for _, t := range children {
		q := fmt.Sprintf(`DELETE FROM %s WHERE %s = $1`, t.name, t.orderColumn)
		if _, err := tx.ExecContext(ctx, q, b.OrderID); err != nil {
			return fmt.Errorf("restore %s of %s: %w", t.name, b.OrderID, err)
		}
	}
	for _, t := range orderTables {
		q := fmt.Sprintf(`INSERT INTO %[1]s SELECT * FROM json_populate_recordset(NULL::%[1]s, $1::json)`, t.name)
		if _, err := tx.ExecContext(ctx, q, b.Rows[t.name]); err != nil {
			return fmt.Errorf("restore %s of %s: %w", t.name, b.OrderID, err)
		}
	}
	return tx.Commit()
}

// reconcileOrderRestored: the order service's database goes back to a
// backup taken when the order was checked out, after it was paid and
// every consumer applied OrderPaid. Reconciliation names the regression
// for a person and takes no action; once the person has put the order
// back (here: the rows as they were before the restore, standing for the
// order rebuilt from the other services' records), the order converges and
// a run finds nothing.
func reconcileOrderRestored(s *session) (string, error) {
	dsn := s.t.Databases[Order]
	if dsn == "" {
		return "", skip("no database URL of the order service to play a restored backup on")
	}
	orderID, sku := s.orderID(""), s.sku("")
	if err := s.api.SetStock(s.ctx, sku, 10); err != nil {
		return "", err
	}
	amount, err := s.placeOrder(orderID, sku, 1, "10.00")
	if err != nil {
		return "", err
	}
	// Created and checked out (version 2, PENDING_PAYMENT): the backup.
	if err := s.waitRelayed(orderID, 2); err != nil {
		return "", err
	}
	backup, err := BackUpOrder(s.ctx, dsn, orderID)
	if err != nil {
		return "", err
	}
	if err := s.pay(orderID, amount); err != nil {
		return "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", err
	}
	if err := s.waitRelayed(orderID, 3); err != nil {
		return "", err
	}
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	settled, err := BackUpOrder(s.ctx, dsn, orderID)
	if err != nil {
		return "", err
	}
	if err := RestoreOrder(s.ctx, dsn, backup); err != nil {
		return "", err
	}
	run, took, err := s.reconcile(orderID)
	if err != nil {
		return "", err
	}
	var regressed []string
	for _, f := range run.Findings {
		if f.Kind != "ORDER_VERSION_REGRESSED" || f.Action != "MANUAL_REVIEW" || !strings.Contains(f.Outcome, "past 3") {
			return "", fmt.Errorf("after the restore %s; want only ORDER_VERSION_REGRESSED MANUAL_REVIEW naming version 3", run)
		}
		regressed = append(regressed, f.Service)
	}
	if !slices.Contains(regressed, Inventory) || run.Actions != 0 {
		return "", fmt.Errorf("after the restore %s, %d actions; want inventory's regression named and no action", run, run.Actions)
	}
	// The person's repair: the order as the other services' records say
	// it is.
	if err := RestoreOrder(s.ctx, dsn, settled); err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := s.waitConverged(orderID); err != nil {
		return "", err
	}
	s.converged = time.Since(start)
	after, _, err := s.reconcile(orderID)
	if err != nil {
		return "", err
	}
	if err := expectFindings(after); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s in %s (%d consumers past the order's version 2), 0 actions; order put back by hand: %s",
		run, took.Round(time.Millisecond), len(regressed), after), nil
}
