package drill_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/scripts/drill"
)

// suiteDatabases are the six services' databases, each migrated as its
// service migrates it: the shared sets of pkg and the service's own
// migrations, read from services/<name>/migrations.
type suiteDatabases struct {
	db  map[string]*sqlx.DB
	dsn map[string]string
}

func newSuiteDatabases(t *testing.T) suiteDatabases {
	t.Helper()
	consumer := []postgres.MigrationSet{inbox.Schema(), versionguard.Schema(), dlq.Schema()}
	own := func(name string) postgres.MigrationSet {
		dir := filepath.Join("..", "..", "services", name, "migrations")
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("the %s service's migrations: %v", name, err)
		}
		return postgres.MigrationSet{Name: name, FS: os.DirFS(dir)}
	}
	sets := map[string][]postgres.MigrationSet{
		drill.Order:          {outbox.Schema(), own(drill.Order)},
		drill.Payment:        append(slices.Clone(consumer), outbox.Schema(), own(drill.Payment)),
		drill.Inventory:      append(slices.Clone(consumer), outbox.Schema(), own(drill.Inventory)),
		drill.Points:         append(slices.Clone(consumer), own(drill.Points)),
		drill.Notification:   append(slices.Clone(consumer), own(drill.Notification)),
		drill.Reconciliation: {own(drill.Reconciliation)},
	}
	out := suiteDatabases{db: map[string]*sqlx.DB{}, dsn: map[string]string{}}
	for _, svc := range drill.Services() {
		db, name := postgrestest.NewDatabase(t, append([]postgres.MigrationSet{idempotency.Schema()}, sets[svc]...)...)
		dsn, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
		if err != nil {
			t.Fatal(err)
		}
		out.db[svc], out.dsn[svc] = db, dsn
	}
	return out
}

func (d suiteDatabases) exec(t *testing.T, service, query string, args ...any) {
	t.Helper()
	if _, err := d.db[service].Exec(query, args...); err != nil {
		t.Fatalf("%s: %s: %v", service, query, err)
	}
}

// consumers are the services with the inbox, version guard and DLQ tables.
var consumerServices = []string{drill.Payment, drill.Inventory, drill.Points, drill.Notification}

// plantRows writes a row of orderID into every table of every database
// that holds one, as the services would: its events' ids all contain
// orderID. The order service's outbox names E-<order>-created and
// E-<order>-paid, the consumers' dedup rows name those, E-<order>-extra
// (an event only the caller knows) and the parked and dead-lettered
// events. Its stock movement takes deducted units of sku.
func plantRows(t *testing.T, d suiteDatabases, orderID, sku string, deducted int) {
	t.Helper()
	paid := "E-" + orderID + "-paid"
	d.exec(t, drill.Order, `INSERT INTO orders (order_id, customer_id, currency, amount, status, version, items)
		VALUES ($1, 'C-1', 'CNY', 10, 'PAID', 3, '[]')`, orderID)
	d.exec(t, drill.Order, `INSERT INTO processed_callbacks (callback_id, order_id, callback_type) VALUES ('CB-' || $1, $1, 'PAYMENT_SUCCEEDED')`, orderID)
	d.exec(t, drill.Order, `INSERT INTO order_refunds (refund_id, order_id, kind, payment_id, amount, currency, status)
		VALUES ('R-' || $1, $1, 'REFUND', 'P-' || $1, 1, 'CNY', 'REQUESTED')`, orderID)
	for _, ev := range []struct{ id, typ string }{{"E-" + orderID + "-created", "OrderCreated"}, {paid, "OrderPaid"}} {
		d.exec(t, drill.Order, `INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload)
			VALUES ($1, $2, 1, $3, 'order-events', '{}')`, ev.id, orderID, ev.typ)
	}
	d.exec(t, drill.Payment, `INSERT INTO payments (payment_id, order_id, amount, currency, status) VALUES ('P-' || $1, $1, 10, 'CNY', 'SUCCEEDED')`, orderID)
	d.exec(t, drill.Payment, `INSERT INTO refunds (refund_id, order_id, payment_id, amount, currency, status)
		VALUES ('PR-' || $1, $1, 'P-' || $1, 1, 'CNY', 'SUCCEEDED')`, orderID)
	d.exec(t, drill.Inventory, `INSERT INTO stock_movements (order_id, event_id, sku, delta, kind) VALUES ($1, $2, $3, $4, 'DEDUCT')`,
		orderID, paid, sku, -deducted)
	d.exec(t, drill.Inventory, `UPDATE stock SET available = available - $2, deducted = deducted + $2 WHERE sku = $1`, sku, deducted)
	d.exec(t, drill.Inventory, `INSERT INTO inventory_orders (order_id, status) VALUES ($1, 'DEDUCTED')`, orderID)
	for _, svc := range []string{drill.Payment, drill.Inventory} {
		d.exec(t, svc, `INSERT INTO outbox_events (event_id, aggregate_id, aggregate_version, event_type, topic, payload)
			VALUES ('CBE-' || $1, $1, 3, 'PaymentSucceeded', 'callbacks', '{}')`, orderID)
	}
	d.exec(t, drill.Points, `INSERT INTO points_ledger (order_id, customer_id, event_id, entry_type, points, amount)
		VALUES ($1, 'C-1', $2, 'EARN', 10, 10)`, orderID, paid)
	d.exec(t, drill.Notification, `INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body)
		VALUES ($1, 'C-1', $2, 'ORDER_PAID', 'db', 'paid')`, orderID, paid)
	for _, svc := range consumerServices {
		for _, suffix := range []string{"-created", "-paid", "-extra", "-parked", "-dead"} {
			d.exec(t, svc, `INSERT INTO processed_events (consumer, event_id) VALUES ($1, $2)`, svc+"-service", "E-"+orderID+suffix)
		}
		d.exec(t, svc, `INSERT INTO aggregate_versions (consumer, aggregate_id, version, state) VALUES ($1, $2, 3, 'PAID')`, svc+"-service", orderID)
		d.exec(t, svc, `INSERT INTO parked_events (consumer, event_id, aggregate_id, aggregate_version, event_type, payload)
			VALUES ($1, $2, $3, 5, 'OrderRefunded', '{}')`, svc+"-service", "E-"+orderID+"-parked", orderID)
		d.exec(t, svc, `WITH dead AS (
				INSERT INTO dead_letters (consumer, event_id, aggregate_id, original_topic, message_value, failure_reason, error_class, attempts, first_failed_at)
				VALUES ($1, $2, $3, 'order-events', 'x', 'INVALID_JSON', 'PERMANENT', 1, now()) RETURNING id)
			INSERT INTO dlq_replays (dead_letter_id, requested_by, outcome) SELECT id, 'drill', 'APPLIED' FROM dead`,
			svc+"-service", "E-"+orderID+"-dead", orderID)
	}
	d.exec(t, drill.Reconciliation, `INSERT INTO convergence_watch (order_id, version, changed_at) VALUES ($1, 3, now())`, orderID)
}

// orderColumns lists every table of db with a column naming an order, and
// that column.
func orderColumns(t *testing.T, db *sqlx.DB) map[string]string {
	t.Helper()
	var cols []struct {
		Table  string `db:"table_name"`
		Column string `db:"column_name"`
	}
	if err := db.Select(&cols, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = 'public' AND column_name IN ('order_id', 'aggregate_id')`); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cols {
		out[c.Table] = c.Column
	}
	return out
}

// rowsOf counts, table by table, the rows of every database that belong
// to orderID: by its order column, and for the tables keyed by event
// (processed_events, dlq_replays) by the event ids, which contain it.
func rowsOf(t *testing.T, d suiteDatabases, orderID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	count := func(svc, table, query string, args ...any) {
		var n int
		if err := d.db[svc].Get(&n, query, args...); err != nil {
			t.Fatalf("%s.%s: %v", svc, table, err)
		}
		out[svc+"."+table] = n
	}
	for _, svc := range drill.Services() {
		for table, col := range orderColumns(t, d.db[svc]) {
			if slices.Contains(keptAudit, table) {
				continue
			}
			count(svc, table, `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, orderID)
		}
	}
	for _, svc := range consumerServices {
		count(svc, "processed_events", `SELECT count(*) FROM processed_events WHERE event_id LIKE 'E-' || $1 || '-%'`, orderID)
		count(svc, "dlq_replays", `SELECT count(*) FROM dlq_replays r JOIN dead_letters d ON d.id = r.dead_letter_id WHERE d.aggregate_id = $1`, orderID)
	}
	return out
}

// keptAudit are the tables with an order column the cleanup leaves alone:
// reconciliation's audit of its runs.
var keptAudit = []string{"reconciliation_findings", "reconciliation_actions"}

// RemovePlanted deletes every row of the planted order, in every database,
// gives its stock back, and leaves another order's rows as they were.
// Every table of a service's schema that names an order is one it
// empties, or the audit it keeps on purpose: a migration that adds one
// fails here until the cleanup knows it.
func TestRemovePlantedRemovesExactlyThatOrder(t *testing.T) {
	d := newSuiteDatabases(t)
	for _, svc := range drill.Services() {
		for table := range orderColumns(t, d.db[svc]) {
			if !slices.Contains(drill.PlantedTables(svc), table) && !slices.Contains(keptAudit, table) {
				t.Errorf("%s's table %s names an order, but drill.RemovePlanted leaves it", svc, table)
			}
		}
	}
	const sku = "SKU-shared"
	d.exec(t, drill.Inventory, `INSERT INTO stock (sku, available) VALUES ($1, 100)`, sku)
	plantRows(t, d, "O-planted", sku, 2)
	plantRows(t, d, "O-other", sku, 3)
	planted, other := rowsOf(t, d, "O-planted"), rowsOf(t, d, "O-other")
	for table, n := range planted {
		if n == 0 {
			t.Fatalf("the fixture wrote no row of O-planted in %s", table)
		}
	}

	removed, err := drill.RemovePlanted(context.Background(), d.dsn, []string{"O-planted"}, []string{"E-O-planted-extra"})
	if err != nil {
		t.Fatal(err)
	}
	if len(removed.Missing) != 0 || len(removed.Services) != len(drill.Services()) || removed.Rows == 0 {
		t.Errorf("removed %+v, want rows of all six services", removed)
	}
	for table, n := range rowsOf(t, d, "O-planted") {
		if n != 0 {
			t.Errorf("%s keeps %d rows of the planted order", table, n)
		}
	}
	for table, n := range rowsOf(t, d, "O-other") {
		if n != other[table] {
			t.Errorf("%s holds %d rows of the other order, want %d as before", table, n, other[table])
		}
	}
	var stock struct{ Available, Deducted int }
	if err := d.db[drill.Inventory].Get(&stock, `SELECT available, deducted FROM stock WHERE sku = $1`, sku); err != nil {
		t.Fatal(err)
	}
	if stock.Available != 97 || stock.Deducted != 3 {
		t.Errorf("stock %d/%d after the cleanup, want 97/3: the planted order's 2 back, the other's 3 still held", stock.Available, stock.Deducted)
	}

	again, err := drill.RemovePlanted(context.Background(), d.dsn, []string{"O-planted"}, nil)
	if err != nil || again.Rows != 0 {
		t.Errorf("a second cleanup removed %d rows (%v), want none", again.Rows, err)
	}
	// Without a database URL a service is skipped and named.
	some := map[string]string{drill.Order: d.dsn[drill.Order]}
	partial, err := drill.RemovePlanted(context.Background(), some, []string{"O-other"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(partial.Missing) != 5 || !slices.Equal(partial.Services, []string{drill.Order}) {
		t.Errorf("with the order service's URL alone: %+v, want it cleaned and the other five missing", partial)
	}
}

// A case removes the order it planted once its verdict is taken, even a
// failing one: poison/invalid-json plants O-<run>-poison-invalid-json on
// the broker, then fails on a suite whose services all answer 500.
func TestCaseRemovesItsPlantedOrder(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, drill.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer broken.Close()
	c, err := drill.Select("poison/invalid-json")
	if err != nil {
		t.Fatal(err)
	}
	const runID, orderID = "unit", "O-unit-poison-invalid-json"
	tg := drill.Target{URLs: map[string]string{}, Brokers: cluster.ListenAddrs(), RunID: runID, Timeout: time.Second}
	for _, svc := range drill.Services() {
		tg.URLs[svc] = broken.URL
	}

	tests := []struct {
		name      string
		databases bool
		keep      bool
		seen      string
		left      bool
	}{
		{"without databases", false, false, "1 planted order kept: no database URLs, cleanup skipped", true},
		{"keep planted", true, true, "1 planted order kept (keep-planted): " + orderID, true},
		{"with databases", true, false, "1 planted order removed (", false},
	}
	// The order's rows, but for the dedup rows of an event only the case
	// knows: its event id is its own.
	d := newSuiteDatabases(t)
	d.exec(t, drill.Inventory, `INSERT INTO stock (sku, available) VALUES ('SKU-1', 10)`)
	plantRows(t, d, orderID, "SKU-1", 1)
	for _, svc := range consumerServices {
		d.exec(t, svc, `DELETE FROM processed_events WHERE event_id = $1`, "E-"+orderID+"-extra")
	}
	// In this order: the rows stay for the first two.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg := tg
			if tt.databases {
				tg.Databases = d.dsn
			}
			tg.KeepPlanted = tt.keep
			r := c[0].Run(context.Background(), tg)
			if r.Pass || r.Skipped || !strings.Contains(r.Seen, tt.seen) {
				t.Fatalf("%+v: want a failure whose line says %q", r, tt.seen)
			}
			left := 0
			for _, n := range rowsOf(t, d, orderID) {
				left += n
			}
			if (left > 0) != tt.left {
				t.Errorf("%d rows of %s left, want rows left: %v", left, orderID, tt.left)
			}
		})
	}
}
