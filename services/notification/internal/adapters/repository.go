// Package adapters keeps the notifications the default sender recorded in
// Postgres. Record runs inside the transaction the inbox opened, so a
// notification, the dedup row and the version guard commit together or not
// at all.
package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

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

// Record stores ns inside tx, in one statement.
func (r *Repository) Record(ctx context.Context, tx *sqlx.Tx, ns []notification.Notification) error {
	if len(ns) == 0 {
		return nil
	}
	cols := make([][]string, 6)
	for _, n := range ns {
		for i, v := range []string{n.OrderID, n.CustomerID, n.EventID, string(n.Kind), n.Channel, n.Body} {
			cols[i] = append(cols[i], v)
		}
	}
	if _, err := tx.ExecContext(ctx, `
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
	if err := r.db.SelectContext(ctx, &ids, `
		SELECT order_id FROM notifications
		WHERE order_id > $1
		GROUP BY order_id HAVING max(created_at) < $2
		ORDER BY order_id LIMIT $3`, after, before, limit); err != nil {
		return nil, fmt.Errorf("list orders with notifications: %w", err)
	}
	return ids, nil
}
