package adapters_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// newDB returns a fresh database with the order service's schema. The
// service embeds its migrations in package main, so tests read the same
// files from disk.
func newDB(t *testing.T) *sqlx.DB {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, outbox.Schema(), postgres.MigrationSet{Name: "order", FS: os.DirFS("../../migrations")})
	return db
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func newOrder(t *testing.T, id string) *order.Order {
	t.Helper()
	o, err := order.New(id, "C-1", "CNY", []order.Item{
		{SKU: "SKU-1", Quantity: 2, UnitPrice: dec("40.00")},
		{SKU: "SKU-2", Quantity: 1, UnitPrice: dec("0.50")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

type outboxRow struct {
	EventID          string `db:"event_id"`
	EventType        string `db:"event_type"`
	AggregateVersion int64  `db:"aggregate_version"`
	Status           string `db:"status"`
	Payload          []byte `db:"payload"`
}

func outboxRows(t *testing.T, db *sqlx.DB, orderID string) []outboxRow {
	t.Helper()
	var rows []outboxRow
	if err := db.Select(&rows, `SELECT event_id, event_type, aggregate_version, status, payload
		FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, orderID); err != nil {
		t.Fatal(err)
	}
	return rows
}

func storedStatus(t *testing.T, db *sqlx.DB, orderID string) (string, int64) {
	t.Helper()
	var row struct {
		Status  string `db:"status"`
		Version int64  `db:"version"`
	}
	if err := db.Get(&row, `SELECT status, version FROM orders WHERE order_id = $1`, orderID); err != nil {
		t.Fatal(err)
	}
	return row.Status, row.Version
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// orders is the use cases over repo, as the service runs them: each
// command's domain call inside one of the repository's transactions.
func orders(repo *adapters.Repository) *app.Orders { return app.NewOrders(repo, nil) }
