// Package storage keeps the notifications the default sender recorded in
// Postgres. Record runs inside the transaction the inbox opened, so a
// notification, the dedup row and the version guard commit together or not
// at all.
package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/services/notification/internal/domain/notification"
)

// Repository reads and writes the notifications table.
type Repository struct {
	db *sqlx.DB
}

// New returns a repository over db.
func New(db *sqlx.DB) *Repository { return &Repository{db: db} }

type notificationRow struct {
	OrderID    string    `db:"order_id"`
	CustomerID string    `db:"customer_id"`
	EventID    string    `db:"event_id"`
	Kind       string    `db:"kind"`
	Channel    string    `db:"channel"`
	Body       string    `db:"body"`
	CreatedAt  time.Time `db:"created_at"`
}

// Record stores n inside tx.
func (r *Repository) Record(ctx context.Context, tx *sqlx.Tx, n notification.Notification) error {
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO notifications (order_id, customer_id, event_id, kind, channel, body)
		VALUES ($1, $2, $3, $4, $5, $6)`,
		n.OrderID, n.CustomerID, n.EventID, string(n.Kind), n.Channel, n.Body); err != nil {
		return fmt.Errorf("record %s notification for order %s: %w", n.Kind, n.OrderID, err)
	}
	return nil
}

// List returns an order's notifications in the order they were sent.
func (r *Repository) List(ctx context.Context, orderID string) ([]notification.Sent, error) {
	var rows []notificationRow
	if err := r.db.SelectContext(ctx, &rows, `
		SELECT order_id, customer_id, event_id, kind, channel, body, created_at
		FROM notifications WHERE order_id = $1 ORDER BY id`, orderID); err != nil {
		return nil, fmt.Errorf("list notifications of order %s: %w", orderID, err)
	}
	out := make([]notification.Sent, len(rows))
	for i, row := range rows {
		out[i] = notification.Sent{
			Notification: notification.Notification{OrderID: row.OrderID, CustomerID: row.CustomerID, EventID: row.EventID,
				Kind: notification.Kind(row.Kind), Channel: row.Channel, Body: row.Body},
			CreatedAt: row.CreatedAt,
		}
	}
	return out, nil
}
