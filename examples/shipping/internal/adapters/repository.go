// Package adapters keeps the shipments in Postgres. The consumer's methods
// write in the transaction of the unit of work the kit opened, so a
// shipment, its history row, the dedup row and the version guard commit
// together or not at all.
package adapters

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/examples/shipping/internal/domain/shipping"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// Repository reads and writes the shipping tables.
type Repository struct {
	db *sqlx.DB
}

// NewRepository returns a repository over db.
func NewRepository(db *sqlx.DB) *Repository { return &Repository{db: db} }

type shipmentRow struct {
	OrderID string `db:"order_id"`
	Status  string `db:"status"`
	Ordered []byte `db:"ordered"`
	Items   []byte `db:"items"`
}

func (row shipmentRow) shipment() (shipping.Shipment, error) {
	s := shipping.Shipment{OrderID: row.OrderID, Status: shipping.Status(row.Status)}
	if err := json.Unmarshal(row.Ordered, &s.Ordered); err != nil {
		return shipping.Shipment{}, fmt.Errorf("decode ordered goods of order %s: %w", row.OrderID, err)
	}
	if err := json.Unmarshal(row.Items, &s.ToShip); err != nil {
		return shipping.Shipment{}, fmt.Errorf("decode goods to ship of order %s: %w", row.OrderID, err)
	}
	return s, nil
}

// Shipments returns the orders' shipments in uow, by order id; an order
// without one is NONE.
func (r *Repository) Shipments(ctx context.Context, uow *versionguard.UnitOfWork, orderIDs []string) (map[string]shipping.Shipment, error) {
	var rows []shipmentRow
	if err := uow.Tx().SelectContext(ctx, &rows,
		`SELECT order_id, status, ordered, items FROM shipments WHERE order_id = ANY($1)`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("load %d shipments: %w", len(orderIDs), err)
	}
	out := make(map[string]shipping.Shipment, len(orderIDs))
	for _, id := range orderIDs {
		out[id] = shipping.Shipment{OrderID: id, Status: shipping.StatusNone}
	}
	for _, row := range rows {
		s, err := row.shipment()
		if err != nil {
			return nil, err
		}
		out[s.OrderID] = s
	}
	return out, nil
}

// Save writes changes in uow with two statements whatever their number:
// every shipment (one change per order, as the version guard hands them)
// and every change's history row.
func (r *Repository) Save(ctx context.Context, uow *versionguard.UnitOfWork, changes []shipping.Change) error {
	if len(changes) == 0 {
		return nil
	}
	tx := uow.Tx()
	var orders, events, types, statuses, ordered, items []string
	for _, c := range changes {
		o, err := json.Marshal(c.Shipment.Ordered)
		if err != nil {
			return fmt.Errorf("encode ordered goods: %w", err)
		}
		i, err := json.Marshal(c.Shipment.ToShip)
		if err != nil {
			return fmt.Errorf("encode goods to ship: %w", err)
		}
		orders = append(orders, c.Shipment.OrderID)
		events = append(events, c.EventID)
		types = append(types, string(c.EventType))
		statuses = append(statuses, string(c.Shipment.Status))
		ordered = append(ordered, string(o))
		items = append(items, string(i))
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO shipments (order_id, status, ordered, items)
		SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::jsonb[])
		ON CONFLICT (order_id) DO UPDATE
		SET status = EXCLUDED.status, items = EXCLUDED.items, updated_at = now()`,
		pq.Array(orders), pq.Array(statuses), pq.Array(ordered), pq.Array(items)); err != nil {
		return fmt.Errorf("save %d shipments: %w", len(changes), err)
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO shipment_events (event_id, order_id, event_type, status, items)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::jsonb[])`,
		pq.Array(events), pq.Array(orders), pq.Array(types), pq.Array(statuses), pq.Array(items)); err != nil {
		return fmt.Errorf("record %d shipment changes: %w", len(changes), err)
	}
	return nil
}

// Shipment returns the order's shipment, or shipping.ErrNotFound.
func (r *Repository) Shipment(ctx context.Context, orderID string) (shipping.Shipment, error) {
	var row shipmentRow
	err := r.db.GetContext(ctx, &row,
		`SELECT order_id, status, ordered, items FROM shipments WHERE order_id = $1`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return shipping.Shipment{}, fmt.Errorf("%w: order %s", shipping.ErrNotFound, orderID)
	}
	if err != nil {
		return shipping.Shipment{}, fmt.Errorf("load shipment of order %s: %w", orderID, err)
	}
	return row.shipment()
}

// History returns the changes of the order's shipment in the order they
// were applied.
func (r *Repository) History(ctx context.Context, orderID string) ([]shipping.Applied, error) {
	var rows []struct {
		EventID   string    `db:"event_id"`
		EventType string    `db:"event_type"`
		Status    string    `db:"status"`
		Items     []byte    `db:"items"`
		AppliedAt time.Time `db:"applied_at"`
	}
	if err := r.db.SelectContext(ctx, &rows, `
		SELECT event_id, event_type, status, items, applied_at
		FROM shipment_events WHERE order_id = $1 ORDER BY id`, orderID); err != nil {
		return nil, fmt.Errorf("list changes of the shipment of order %s: %w", orderID, err)
	}
	out := make([]shipping.Applied, len(rows))
	for i, row := range rows {
		out[i] = shipping.Applied{EventID: row.EventID, EventType: row.EventType,
			Status: shipping.Status(row.Status), AppliedAt: row.AppliedAt.UTC()}
		if err := json.Unmarshal(row.Items, &out[i].ToShip); err != nil {
			return nil, fmt.Errorf("decode goods to ship of event %s: %w", row.EventID, err)
		}
	}
	return out, nil
}
