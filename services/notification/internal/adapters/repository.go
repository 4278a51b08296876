// Package adapters keeps the notifications the default sender recorded in
// Postgres. Record writes in the transaction of the unit of work the kit
// opened, so a notification, the dedup row and the version guard commit
// together or not at all.
package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Repository reads and writes the notifications table.
type Repository struct {
	db *sqlx.DB
}

// NewRepository returns a repository over db.
func NewRepository(db *sqlx.DB) *Repository { return &Repository{db: db} }

type notificationRow struct {
	OrderID    string    `db:"order_id"`
	CustomerID string    `db:"customer_id"`
	EventID    string    `db:"event_id"`
	Kind       string    `db:"kind"`
	Channel    string    `db:"channel"`
	Body       string    `db:"body"`
	CreatedAt  time.Time `db:"created_at"`
}

// Record stores ns in uow, in one statement.
func (r *Repository) Record(ctx context.Context, uow *versionguard.UnitOfWork, ns []notification.Notification) error {
	if len(ns) == 0 {
		return nil
	}
	cols := make([][]string, 6)
	for _, n := range ns {
		for i, v := range []string{n.OrderID, n.CustomerID, n.EventID, string(n.Kind), n.Channel, n.Body} {
			cols[i] = append(cols[i], v)
		}
	}
	if _, err := uow.Tx().ExecContext(ctx, `
		INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])`,
		pq.Array(cols[0]), pq.Array(cols[1]), pq.Array(cols[2]), pq.Array(cols[3]), pq.Array(cols[4]), pq.Array(cols[5])); err != nil {
		return fmt.Errorf("record %d notifications (first: order %s): %w", len(ns), ns[0].OrderID, err)
	}
	return nil
}

// List returns an order's notifications in the order they were sent.
func (r *Repository) List(ctx context.Context, orderID string) ([]notification.Sent, error) {
	byOrder, err := r.ListOf(ctx, r.db, []string{orderID})
	return byOrder[orderID], err
}

// ListOf reads the notifications of many orders through q with one
// statement, each order's in the order they were sent, times in UTC; q is
// a snapshot the caller reads other tables in too. An order without
// notifications has none in the map.
func (r *Repository) ListOf(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string][]notification.Sent, error) {
	var rows []notificationRow
	if err := sqlx.SelectContext(ctx, q, &rows, `
		SELECT order_id, customer_id, event_id, kind, channel, body, created_at
		FROM notifications WHERE order_id = ANY($1) ORDER BY id`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("list notifications of %d orders: %w", len(orderIDs), err)
	}
	out := make(map[string][]notification.Sent, len(orderIDs))
	for _, row := range rows {
		out[row.OrderID] = append(out[row.OrderID], row.sent())
	}
	return out, nil
}

func (row notificationRow) sent() notification.Sent {
	return notification.Sent{
		Notification: notification.Notification{OrderID: row.OrderID, CustomerID: row.CustomerID, EventID: row.EventID,
			Kind: notification.Kind(row.Kind), Channel: row.Channel, Body: row.Body},
		CreatedAt: row.CreatedAt.UTC(),
	}
}

// EffectOrders lists up to limit order ids after after, ascending, that
// the service holds notifications sent for, last written before before: what
// reconciliation looks up at the order service to find orphans.
func (r *Repository) EffectOrders(ctx context.Context, after string, before time.Time, limit int) ([]string, error) {
	ids := []string{}
	if err := r.db.SelectContext(ctx, &ids, effectOrders, after, before, limit); err != nil {
		return nil, fmt.Errorf("list orders with notifications: %w", err)
	}
	return ids, nil
}

// effectOrders walks the distinct order ids of notifications through its
// (order_id, id) index, one smallest-id-after look-up each, and keeps
// those without a notification written at or after $2. Its plan does not
// depend on the planner's statistics: a GROUP BY order_id HAVING
// max(created_at) < $2 over the table was planned, without them (a bulk
// load or a restore not analyzed yet, autovacuum off), as a scan and hash
// of every notification after $1 for each page, as the points service's
// same query over its ledger was: 76 ms for a page of 1 000 from the
// middle of 340 000 entries, against 0.5 ms once analyzed
// (docs/runs/2026-12-05-reconcile-100k-paid-after.txt).
const effectOrders = `
	WITH RECURSIVE ids (order_id) AS (
		(SELECT min(order_id) FROM notifications WHERE order_id > $1)
		UNION ALL
		SELECT (SELECT min(e.order_id) FROM notifications e WHERE e.order_id > ids.order_id)
		FROM ids WHERE ids.order_id IS NOT NULL
	)
	SELECT order_id FROM ids
	WHERE order_id IS NOT NULL
	  AND NOT EXISTS (SELECT 1 FROM notifications y WHERE y.order_id = ids.order_id AND y.created_at >= $2)
	LIMIT $3`
