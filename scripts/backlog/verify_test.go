package backlog_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// verifyDB is one database with the tables of inventory, points and
// notification: their own migrations, read from the services' directories
// so the checks run against the schema the services have, and the shared
// inbox, version guard and DLQ sets (keyed by consumer, so the three share
// them).
func verifyDB(t *testing.T) *sql.DB {
	t.Helper()
	server := os.Getenv("DATABASE_URL")
	if server == "" {
		server = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	name := fmt.Sprintf("backlog_verify_%d", time.Now().UnixNano())
	sets := []postgres.MigrationSet{inbox.Schema(), versionguard.Schema(), dlq.Schema()}
	for _, svc := range []string{"inventory", "points", "notification"} {
		sets = append(sets, postgres.MigrationSet{Name: svc, FS: os.DirFS(filepath.Join("..", "..", "services", svc, "migrations"))})
	}
	db, err := postgres.OpenService(ctx, server, name, postgres.PoolConfig{MaxOpen: 2}, sets...)
	if err != nil {
		t.Fatalf("a database with the services' tables: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		if err := postgres.DropDatabase(context.Background(), server, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	return db.DB
}

// groups are the consumer groups the checks look for.
var groups = map[string]string{"inventory": "inventory-service", "points": "points-service", "notification": "notification-service"}

// handles lists the event types each service has a transition for.
var handles = map[string][]event.Type{
	"inventory":    {event.OrderPaid, event.OrderRefunded},
	"points":       {event.OrderPaid, event.OrderRefunded},
	"notification": {event.OrderPaid, event.OrderRefunded, event.OrderRefundRejected},
}

// applyRun writes what inventory, points and notification commit for a
// mixed run of cfg, one event at a time from the published stream: a
// dedup row per handled event counting its copies as duplicates (a refund
// published before its payment parked first), each effect once, each
// order's last version, the stock of every SKU.
func applyRun(t *testing.T, db *sql.DB, cfg backlog.Config) {
	t.Helper()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.Exec(query, args...); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
	kept := map[string]int{}
	for i := 1; i <= cfg.Count; i++ {
		events, err := loadgen.MixedEvents(cfg.RunID, i, cfg.SKUs, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		order, customer, sku := loadgen.OrderID(cfg.RunID, i), loadgen.CustomerID(cfg.RunID, i), loadgen.SKUFor(cfg.RunID, i, cfg.SKUs)
		copies := map[string]int{}
		for _, env := range events {
			copies[env.EventID]++
		}
		last := map[string]int64{}
		for j, env := range events {
			if copies[env.EventID] == 0 {
				continue // a copy: counted with the first
			}
			for svc, types := range handles {
				if !slices.Contains(types, env.EventType) {
					continue
				}
				outcome := "APPLIED"
				if j == 0 && env.EventType != event.OrderPaid {
					outcome = "WAITING_FOR_GAP"
				}
				exec(`INSERT INTO processed_events (consumer, event_id, outcome, duplicates) VALUES ($1, $2, $3, $4)`,
					groups[svc], env.EventID, outcome, copies[env.EventID]-1)
				last[svc] = max(last[svc], env.AggregateVersion)
			}
			copies[env.EventID] = 0
			switch env.EventType {
			case event.OrderPaid:
				kept[sku]++
				exec(`INSERT INTO stock_movements (order_id, event_id, sku, delta, kind) VALUES ($1, $2, $3, -1, 'DEDUCT')`, order, env.EventID, sku)
				exec(`INSERT INTO points_ledger (order_id, customer_id, event_id, entry_type, points, amount) VALUES ($1, $2, $3, 'EARN', 10, 10)`,
					order, customer, env.EventID)
				exec(`INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body) VALUES ($1, $2, $3, 'ORDER_PAID', 'IN_APP', 'paid')`,
					order, customer, env.EventID)
			case event.OrderRefunded:
				kept[sku]--
				exec(`INSERT INTO stock_movements (order_id, event_id, sku, delta, kind) VALUES ($1, $2, $3, 1, 'RESTOCK')`, order, env.EventID, sku)
				exec(`INSERT INTO points_ledger (order_id, customer_id, event_id, entry_type, points, amount) VALUES ($1, $2, $3, 'REVERSAL', -10, 10)`,
					order, customer, env.EventID)
				exec(`INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body) VALUES ($1, $2, $3, 'ORDER_REFUNDED', 'IN_APP', 'refunded')`,
					order, customer, env.EventID)
			case event.OrderRefundRejected:
				exec(`INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body) VALUES ($1, $2, $3, 'REFUND_REJECTED', 'IN_APP', 'rejected')`,
					order, customer, env.EventID)
			}
		}
		for svc, v := range last {
			exec(`INSERT INTO aggregate_versions (consumer, aggregate_id, version, state) VALUES ($1, $2, $3, 'DONE')`, groups[svc], order, v)
		}
	}
	for sku, n := range kept {
		exec(`INSERT INTO stock (sku, available, deducted) VALUES ($1, 100, $2)`, sku, n)
	}
}

// failed lists the names of the failed checks.
func failed(checks []backlog.Check) []string {
	var out []string
	for _, c := range checks {
		if !c.Pass {
			out = append(out, c.Name+" (got "+c.Got+")")
		}
	}
	return out
}

// The exactly-once checks of a mixed run hold the databases to the model:
// a run applied as the consumers apply it passes every check, and each
// planted double effect or gap fails the check named for it, and only it.
func TestVerifyMixedRun(t *testing.T) {
	db := verifyDB(t)
	cfg := backlog.Config{RunID: "v1", Count: 60, SKUs: 4, Mix: true}
	applyRun(t, db, cfg)
	dbs := map[string]*sql.DB{"inventory": db, "points": db, "notification": db}
	verify := func(t *testing.T) []backlog.Check {
		t.Helper()
		checks, err := backlog.Verify(context.Background(), cfg, dbs)
		if err != nil {
			t.Fatal(err)
		}
		return checks
	}
	checks := verify(t)
	if len(checks) != 16 {
		t.Fatalf("%d checks, want six of inventory and five each of points and notification: %+v", len(checks), checks)
	}
	if f := failed(checks); len(f) > 0 {
		t.Fatalf("the run as applied fails %v", f)
	}

	if l := backlog.LoadOf(cfg); l.Orders != 60 || l.Refunded != 18 || l.RefundRejected != 6 || l.Events != 60+18+6 || l.Republished == 0 {
		t.Errorf("load %+v, want 60 orders, 3 in 10 refunded, 1 in 10 rejected, 84 events, some twice", l)
	}

	// Ids the defects are planted on.
	const paid = "E-v1-000001" // order 1: paid only
	refunded, republished := "", ""
	for i := 1; i <= cfg.Count && (refunded == "" || republished == ""); i++ {
		if id := loadgen.RefundEventID(cfg.RunID, i); refunded == "" && loadgen.ShapeOf(i) == loadgen.ShapeRefunded && !loadgen.Republished(id) {
			refunded = id
		}
		if id := loadgen.EventID(cfg.RunID, i); republished == "" && loadgen.Republished(id) {
			republished = id
		}
	}
	if refunded == "" || republished == "" {
		t.Fatal("the run has no refund or no republished payment to plant defects on")
	}

	tests := []struct {
		name        string
		plant, undo string
		arg         string
		// want are the checks that must fail, and no other.
		want []string
	}{
		{"an extra ledger row under another event id",
			`INSERT INTO points_ledger (order_id, customer_id, event_id, entry_type, points, amount) VALUES ('O-v1-000001', 'C-v1-000001', $1 || '-again', 'EARN', 10, 10)`,
			`DELETE FROM points_ledger WHERE event_id = $1 || '-again'`, paid,
			[]string{"points: ledger rows = earn + reversal"}},
		{"an extra notification",
			`INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body) VALUES ('O-v1-000001', 'C-v1-000001', $1 || '-again', 'ORDER_PAID', 'IN_APP', 'paid')`,
			`DELETE FROM notifications WHERE event_id = $1 || '-again'`, paid,
			[]string{"notification: notifications per kind"}},
		{"an extra stock movement",
			`INSERT INTO stock_movements (order_id, event_id, sku, delta, kind) VALUES ('O-v1-000001', $1, 'SKU-v1-2', -1, 'DEDUCT')`,
			`DELETE FROM stock_movements WHERE event_id = $1 AND sku = 'SKU-v1-2'`, paid,
			[]string{"inventory: one deduction per payment, one restock per refund", "inventory: stock deducted = sum of quantities kept"}},
		{"a unit deducted twice",
			`UPDATE stock SET deducted = deducted + 1 WHERE sku = $1`,
			`UPDATE stock SET deducted = deducted - 1 WHERE sku = $1`, "SKU-v1-1",
			[]string{"inventory: stock deducted = sum of quantities kept"}},
		{"a missing reversal",
			`UPDATE points_ledger SET event_id = 'X' || event_id, order_id = 'X' || order_id WHERE event_id = $1`,
			`UPDATE points_ledger SET event_id = substr(event_id, 2), order_id = substr(order_id, 2) WHERE event_id = 'X' || $1`, refunded,
			[]string{"points: ledger rows = earn + reversal"}},
		{"a missing dedup row",
			`UPDATE processed_events SET event_id = 'X' || event_id WHERE consumer = 'notification-service' AND event_id = $1`,
			`UPDATE processed_events SET event_id = substr(event_id, 2) WHERE consumer = 'notification-service' AND event_id = 'X' || $1`, refunded,
			[]string{"notification: every event recorded once and applied"}},
		{"a copy ignored as stale rather than recognised",
			`UPDATE processed_events SET outcome = 'IGNORED_STALE_EVENT', duplicates = 0 WHERE consumer = 'inventory-service' AND event_id = $1`,
			`UPDATE processed_events SET outcome = 'APPLIED', duplicates = 1 WHERE consumer = 'inventory-service' AND event_id = $1`, republished,
			[]string{"inventory: every event recorded once and applied", "inventory: every republished event recognised as a duplicate"}},
		{"a republished event not counted as a duplicate",
			`UPDATE processed_events SET duplicates = 0 WHERE consumer = 'points-service' AND event_id = $1`,
			`UPDATE processed_events SET duplicates = 1 WHERE consumer = 'points-service' AND event_id = $1`, republished,
			[]string{"points: every republished event recognised as a duplicate"}},
		{"a dead letter",
			`INSERT INTO dead_letters (consumer, event_id, original_topic, message_value, failure_reason, error_class, attempts, first_failed_at)
			 VALUES ('notification-service', $1, 'order-events', '\x00', 'planted', 'poison', 1, now())`,
			`DELETE FROM dead_letters WHERE event_id = $1`, paid,
			[]string{"notification: nothing dead-lettered"}},
		{"an order left behind a version",
			`UPDATE aggregate_versions SET version = 3 WHERE consumer = 'points-service' AND aggregate_id = $1`,
			`UPDATE aggregate_versions SET version = 5 WHERE consumer = 'points-service' AND aggregate_id = $1`, "O-v1-000004",
			[]string{"points: per-order order held"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := db.Exec(tt.plant, tt.arg); err != nil {
				t.Fatalf("plant: %v", err)
			}
			got := failed(verify(t))
			if _, err := db.Exec(tt.undo, tt.arg); err != nil {
				t.Fatalf("undo: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Errorf("failed checks %q, want %q", got, tt.want)
			}
			for i := range min(len(got), len(tt.want)) {
				if !strings.HasPrefix(got[i], tt.want[i]+" (") {
					t.Errorf("failed checks %q, want %q", got, tt.want)
				}
			}
			if f := failed(verify(t)); len(f) > 0 {
				t.Fatalf("undoing the defect left %v failing", f)
			}
		})
	}
}
