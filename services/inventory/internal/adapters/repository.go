// Package adapters keeps the inventory service's stock, orders and stock
// movements in Postgres. The consumer's methods write in the transaction
// of the unit of work the kit opened, so stock, movements, the dedup row
// and the version guard commit together or not at all.
package adapters

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/app"
	"github.com/reliable-orders/fulfillment/services/inventory/internal/domain/inventory"
)

// Repository reads and writes the inventory tables.
type Repository struct {
	db    *sqlx.DB
	relay RelayWaker
}

// RelayWaker is the callback relay of the service (outbox.Relay), woken
// once a transaction that added callbacks to the outbox has committed.
type RelayWaker interface{ Wake() }

// NewRepository returns a repository over db. relay may be nil; without
// it the callbacks leave at the relay's next poll.
func NewRepository(db *sqlx.DB, relay RelayWaker) *Repository {
	return &Repository{db: db, relay: relay}
}

// committed wakes the relay for the callbacks a committed transaction
// added.
func (r *Repository) committed() {
	if r.relay != nil {
		r.relay.Wake()
	}
}

type movementRow struct {
	OrderID   string    `db:"order_id"`
	EventID   string    `db:"event_id"`
	SKU       string    `db:"sku"`
	Delta     int       `db:"delta"`
	Kind      string    `db:"kind"`
	CreatedAt time.Time `db:"created_at"`
}

type orderRow struct {
	OrderID   string    `db:"order_id"`
	Status    string    `db:"status"`
	Reason    string    `db:"reason"`
	Items     []byte    `db:"items"`
	Restocked []byte    `db:"restocked"`
	UpdatedAt time.Time `db:"updated_at"`
}

type stockRow struct {
	SKU       string `db:"sku"`
	Available int    `db:"available"`
	Deducted  int    `db:"deducted"`
}

// LoadOrders returns the orders in uow, by id; an order never seen is
// NONE.
func (r *Repository) LoadOrders(ctx context.Context, uow *versionguard.UnitOfWork, orderIDs []string) (map[string]inventory.Order, error) {
	var rows []orderRow
	if err := uow.Tx().SelectContext(ctx, &rows,
		`SELECT order_id, status, reason, items, restocked, updated_at FROM inventory_orders WHERE order_id = ANY($1)`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("load inventory orders: %w", err)
	}
	out := make(map[string]inventory.Order, len(orderIDs))
	for _, id := range orderIDs {
		out[id] = inventory.Order{ID: id, Status: inventory.StatusNone}
	}
	for _, row := range rows {
		o, err := row.order()
		if err != nil {
			return nil, err
		}
		out[o.ID] = o
	}
	return out, nil
}

// Records reads the orders through q with one statement, whatever their
// number; q is a snapshot the caller reads other tables in too. Every id
// has a record: an order never seen is NONE.
func (r *Repository) Records(ctx context.Context, q sqlx.QueryerContext, orderIDs []string) (map[string]app.OrderRecord, error) {
	var rows []orderRow
	if err := sqlx.SelectContext(ctx, q, &rows,
		`SELECT order_id, status, reason, items, restocked, updated_at FROM inventory_orders WHERE order_id = ANY($1)`, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read %d inventory orders: %w", len(orderIDs), err)
	}
	out := make(map[string]app.OrderRecord, len(orderIDs))
	for _, id := range orderIDs {
		out[id] = app.OrderRecord{Order: inventory.Order{ID: id, Status: inventory.StatusNone}}
	}
	for _, row := range rows {
		o, err := row.order()
		if err != nil {
			return nil, err
		}
		out[o.ID] = app.OrderRecord{Order: o, UpdatedAt: row.UpdatedAt.UTC()}
	}
	return out, nil
}

// Order returns the order; an order never seen is NONE (a real state, not
// an error).
func (r *Repository) Order(ctx context.Context, orderID string) (inventory.Order, error) {
	return getOrder(ctx, r.db, orderID)
}

func getOrder(ctx context.Context, q sqlx.QueryerContext, orderID string) (inventory.Order, error) {
	var row orderRow
	err := sqlx.GetContext(ctx, q, &row,
		`SELECT order_id, status, reason, items, restocked, updated_at FROM inventory_orders WHERE order_id = $1`, orderID)
	if errors.Is(err, sql.ErrNoRows) {
		return inventory.Order{ID: orderID, Status: inventory.StatusNone}, nil
	}
	if err != nil {
		return inventory.Order{}, fmt.Errorf("load inventory order %s: %w", orderID, err)
	}
	return row.order()
}

func (row orderRow) order() (inventory.Order, error) {
	o := inventory.Order{ID: row.OrderID, Status: inventory.Status(row.Status), Reason: row.Reason}
	if err := json.Unmarshal(row.Items, &o.Items); err != nil {
		return inventory.Order{}, fmt.Errorf("decode items of order %s: %w", row.OrderID, err)
	}
	if err := json.Unmarshal(row.Restocked, &o.Restocked); err != nil {
		return inventory.Order{}, fmt.Errorf("decode restocked items of order %s: %w", row.OrderID, err)
	}
	return o, nil
}

// ReadStock returns what each of skus has available as uow last saw it,
// without locking the rows: what the stock covers is decided on this and
// checked again when MoveStock moves the rows. A SKU without a row is absent
// from the map.
func (r *Repository) ReadStock(ctx context.Context, uow *versionguard.UnitOfWork, skus []string) (map[string]int, error) {
	return readStock(ctx, uow.Tx(), `SELECT sku, available, deducted FROM stock WHERE sku = ANY($1)`, skus)
}

// LockStock locks the stock rows of skus until uow ends and returns what
// each has available; a SKU without a row is absent from the map. Rows are
// locked in SKU order, the same order every transaction uses, so
// concurrent orders over the same hot SKUs queue instead of deadlocking.
func (r *Repository) LockStock(ctx context.Context, uow *versionguard.UnitOfWork, skus []string) (map[string]int, error) {
	return readStock(ctx, uow.Tx(), `SELECT sku, available, deducted FROM stock WHERE sku = ANY($1) ORDER BY sku FOR UPDATE`, skus)
}

func readStock(ctx context.Context, tx *sqlx.Tx, query string, skus []string) (map[string]int, error) {
	var rows []stockRow
	if err := tx.SelectContext(ctx, &rows, query, pq.Array(skus)); err != nil {
		return nil, fmt.Errorf("read stock: %w", err)
	}
	out := make(map[string]int, len(rows))
	for _, row := range rows {
		out[row.SKU] = row.Available
	}
	return out, nil
}

// SaveAll writes changes in uow with two statements whatever their
// number: every movement gets its row, every order its record (the last
// change of an order wins). The stock rows are MoveStock's.
func (r *Repository) SaveAll(ctx context.Context, uow *versionguard.UnitOfWork, changes []inventory.EventChange) error {
	if err := saveMovements(ctx, uow.Tx(), changes); err != nil {
		return err
	}
	return saveOrders(ctx, uow.Tx(), changes)
}

// AddCallbacks writes each callback to the order service into the outbox
// in uow, and wakes the relay once uow has committed, so they leave at
// once rather than at the relay's next poll.
func (r *Repository) AddCallbacks(ctx context.Context, uow *versionguard.UnitOfWork, callbacks []event.Callback) error {
	if len(callbacks) == 0 {
		return nil
	}
	for _, cb := range callbacks {
		msg, err := outbox.CallbackMessage(cb, 0)
		if err != nil {
			return err
		}
		if err := outbox.Add(ctx, uow.Tx(), msg); err != nil {
			return err
		}
	}
	uow.AfterCommit(r.committed)
	return nil
}

// MoveStock moves the stock rows by the sum of each SKU's deltas in
// changes, in one statement that locks them in SKU order (so batches over
// the same hot SKUs queue instead of deadlocking), each only if it still
// covers its sum. It returns false if one did not (the stock was taken
// since it was read, or its row is gone): some rows may have moved, and
// the caller must roll the transaction back.
func (r *Repository) MoveStock(ctx context.Context, uow *versionguard.UnitOfWork, changes []inventory.EventChange) (bool, error) {
	skus, deltas := stockDeltas(changes)
	if len(skus) == 0 {
		return true, nil
	}
	var moved []string
	if err := uow.Tx().SelectContext(ctx, &moved, `
		WITH locked AS (SELECT sku, available FROM stock WHERE sku = ANY($1) ORDER BY sku FOR UPDATE)
		UPDATE stock AS s
		SET available = s.available + m.delta, deducted = s.deducted - m.delta, updated_at = now()
		FROM locked AS l JOIN unnest($1::text[], $2::int[]) AS m(sku, delta) ON l.sku = m.sku
		WHERE s.sku = m.sku AND l.available + m.delta >= 0
		RETURNING s.sku`, pq.Array(skus), pq.Array(deltas)); err != nil {
		return false, fmt.Errorf("move stock: %w", err)
	}
	return len(moved) == len(skus), nil
}

func saveMovements(ctx context.Context, tx *sqlx.Tx, changes []inventory.EventChange) error {
	var orderIDs, eventIDs, skus, kinds []string
	var deltas []int64
	for _, c := range changes {
		for _, m := range c.Change.Movements {
			orderIDs = append(orderIDs, c.Change.Order.ID)
			eventIDs = append(eventIDs, c.EventID)
			skus = append(skus, m.SKU)
			deltas = append(deltas, int64(m.Delta))
			kinds = append(kinds, string(m.Kind))
		}
	}
	if len(skus) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO stock_movements (order_id, event_id, sku, delta, kind)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[])`,
		pq.Array(orderIDs), pq.Array(eventIDs), pq.Array(skus), pq.Array(deltas), pq.Array(kinds)); err != nil {
		return fmt.Errorf("record stock movements: %w", err)
	}
	return nil
}

func saveOrders(ctx context.Context, tx *sqlx.Tx, changes []inventory.EventChange) error {
	last := make(map[string]int, len(changes))
	for i, c := range changes {
		last[c.Change.Order.ID] = i
	}
	var ids, statuses, reasons, items, restocked []string
	for i, c := range changes {
		if last[c.Change.Order.ID] != i {
			continue
		}
		o := c.Change.Order
		raw, err := json.Marshal(nonNil(o.Items))
		if err != nil {
			return fmt.Errorf("encode order items: %w", err)
		}
		back, err := json.Marshal(nonNil(o.Restocked))
		if err != nil {
			return fmt.Errorf("encode restocked items: %w", err)
		}
		ids = append(ids, o.ID)
		statuses = append(statuses, string(o.Status))
		reasons = append(reasons, o.Reason)
		items = append(items, string(raw))
		restocked = append(restocked, string(back))
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO inventory_orders (order_id, status, reason, items, restocked)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[])
		ON CONFLICT (order_id) DO UPDATE
		SET status = EXCLUDED.status, reason = EXCLUDED.reason, items = EXCLUDED.items,
		    restocked = EXCLUDED.restocked, updated_at = now()`,
		pq.Array(ids), pq.Array(statuses), pq.Array(reasons), pq.Array(items), pq.Array(restocked)); err != nil {
		return fmt.Errorf("record inventory orders: %w", err)
	}
	return nil
}

// nonNil stores no lines as [], never null.
func nonNil(lines []inventory.Line) []inventory.Line {
	if lines == nil {
		return []inventory.Line{}
	}
	return lines
}

// stockDeltas is the summed delta of every SKU the changes move, in SKU
// order.
func stockDeltas(changes []inventory.EventChange) ([]string, []int64) {
	sum := map[string]int64{}
	for _, c := range changes {
		for _, m := range c.Change.Movements {
			sum[m.SKU] += int64(m.Delta)
		}
	}
	skus := slices.Sorted(maps.Keys(sum))
	deltas := make([]int64, len(skus))
	for i, sku := range skus {
		deltas[i] = sum[sku]
	}
	return skus, deltas
}

// Stock returns the stock of sku.
func (r *Repository) Stock(ctx context.Context, sku string) (inventory.Stock, error) {
	var row stockRow
	err := r.db.GetContext(ctx, &row, `SELECT sku, available, deducted FROM stock WHERE sku = $1`, sku)
	if errors.Is(err, sql.ErrNoRows) {
		return inventory.Stock{}, fmt.Errorf("%w: %s", inventory.ErrSKUNotFound, sku)
	}
	if err != nil {
		return inventory.Stock{}, fmt.Errorf("load stock %s: %w", sku, err)
	}
	return inventory.Stock(row), nil
}

// SetAvailable sets what sku has available, creating the SKU if needed, and
// returns its new stock. What paid orders hold (deducted) is unchanged.
func (r *Repository) SetAvailable(ctx context.Context, sku string, available int) (inventory.Stock, error) {
	var row stockRow
	if err := r.db.GetContext(ctx, &row, `
		INSERT INTO stock (sku, available) VALUES ($1, $2)
		ON CONFLICT (sku) DO UPDATE SET available = EXCLUDED.available, updated_at = now()
		RETURNING sku, available, deducted`, sku, available); err != nil {
		return inventory.Stock{}, fmt.Errorf("set stock %s: %w", sku, err)
	}
	return inventory.Stock(row), nil
}

// Movements returns the stock movements of an order in the order they
// were applied.
func (r *Repository) Movements(ctx context.Context, orderID string) ([]inventory.AppliedMovement, error) {
	var rows []movementRow
	if err := r.db.SelectContext(ctx, &rows, `
		SELECT order_id, event_id, sku, delta, kind, created_at
		FROM stock_movements WHERE order_id = $1 ORDER BY id`, orderID); err != nil {
		return nil, fmt.Errorf("list stock movements of %s: %w", orderID, err)
	}
	out := make([]inventory.AppliedMovement, len(rows))
	for i, row := range rows {
		out[i] = inventory.AppliedMovement{
			Movement: inventory.Movement{SKU: row.SKU, Delta: row.Delta, Kind: inventory.MovementKind(row.Kind)},
			OrderID:  row.OrderID, EventID: row.EventID, CreatedAt: row.CreatedAt,
		}
	}
	return out, nil
}

// EffectOrders lists up to limit order ids after after, ascending, that
// the service holds a stock record (deducted, restocked or rejected) for, last written before before: what
// reconciliation looks up at the order service to find orphans.
func (r *Repository) EffectOrders(ctx context.Context, after string, before time.Time, limit int) ([]string, error) {
	ids := []string{}
	if err := r.db.SelectContext(ctx, &ids, `
		SELECT order_id FROM inventory_orders
		WHERE order_id > $1 AND updated_at < $2
		ORDER BY order_id LIMIT $3`, after, before, limit); err != nil {
		return nil, fmt.Errorf("list orders with stock records: %w", err)
	}
	return ids, nil
}
