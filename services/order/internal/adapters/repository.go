// Package adapters connects the order service's use cases (internal/app)
// to the outside world: the Postgres repository, which runs each command's
// domain call in the transaction that writes the order row, its refunds
// and the outbox rows of its events (app.Store), and the HTTP client that
// reads the other services for the order snapshot (app.Peers).
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
	"github.com/shopspring/decimal"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/services/order/internal/app"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

// Producer is the producer field of every event the order service emits.
const Producer = "order-service"

// FailPointBeforeCommit fires after a state change and its outbox row are
// written and before the transaction commits, so a test or drill can prove
// that a failure there leaves neither the change nor the event behind.
const FailPointBeforeCommit = "order.before-commit"

// Repository stores orders. Every state change is one transaction that
// updates the order row (guarded by its version) and then adds the event
// to the outbox, so the event exists exactly when the change does.
type Repository struct {
	db         *sqlx.DB
	topic      string
	failPoints *failpoint.Registry
	relay      RelayWaker
}

// RelayWaker is the outbox relay of the service (outbox.Relay), woken once
// a transaction that added outbox rows has committed.
type RelayWaker interface{ Wake() }

// NewRepository returns a repository whose events go to topic. failPoints
// and relay may be nil; without a relay the events leave at the relay's
// next poll.
func NewRepository(db *sqlx.DB, topic string, failPoints *failpoint.Registry, relay RelayWaker) *Repository {
	return &Repository{db: db, topic: topic, failPoints: failPoints, relay: relay}
}

// committed wakes the relay for the events a committed transaction added.
func (r *Repository) committed() {
	if r.relay != nil {
		r.relay.Wake()
	}
}

// Create stores a new order with events (its OrderCreated) in one
// transaction and reports true. When an order with o's id exists it
// writes nothing and returns the stored order, in whatever state it has
// reached, and false.
func (r *Repository) Create(ctx context.Context, o *order.Order, events []order.Event) (*order.Order, bool, error) {
	stored := o
	var inserted bool
	err := postgres.InTx(ctx, r.db, func(tx *sqlx.Tx) error {
		stored, inserted = o, false
		items, err := encodeItems(o.Items)
		if err != nil {
			return err
		}
		msgs, err := r.messages(ctx, o, events)
		if err != nil {
			return err
		}
		created, err := outbox.AddWith(ctx, tx, `
			INSERT INTO orders (order_id, customer_id, currency, amount, status, version, items)
			VALUES ($1, $2, $3, $4, $5, $6, $7)
			ON CONFLICT (order_id) DO NOTHING`,
			[]any{o.ID, o.CustomerID, o.Currency, o.Amount, o.Status, o.Version, items}, msgs...)
		if err != nil {
			return fmt.Errorf("insert order %s: %w", o.ID, err)
		}
		if !created {
			existing, err := get(ctx, tx, o.ID, false)
			if err != nil {
				return err
			}
			stored = existing
			return nil
		}
		inserted = true
		return r.failPoints.Inject(FailPointBeforeCommit)
	})
	if err != nil {
		return nil, false, err
	}
	if inserted {
		r.committed()
	}
	return stored, inserted, nil
}

// Update runs change on a copy of order id under its row lock and writes
// what it changed, guarded by the version, with its events. change returns
// the events of the change: none means nothing changed (an idempotent
// repeat), an error rolls everything back. Update returns the order as
// stored afterwards; when change fails it returns the order as it was (so
// a business rejection can report the current status) and the error.
func (r *Repository) Update(ctx context.Context, id string, change app.Change) (*order.Order, error) {
	return r.update(ctx, id, nil, change)
}

// UpdateOnce is Update of cb's order that records cb's callbackId in
// processed_callbacks in the same transaction, so a re-delivery changes
// nothing even after the order has moved on.
func (r *Repository) UpdateOnce(ctx context.Context, cb order.Callback, change app.Change) (*order.Order, error) {
	return r.update(ctx, cb.OrderID, &cb, change)
}

func (r *Repository) update(ctx context.Context, id string, cb *order.Callback, change app.Change) (*order.Order, error) {
	var current, changed *order.Order
	err := postgres.InTx(ctx, r.db, func(tx *sqlx.Tx) error {
		o, err := get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		current = o
		if cb != nil {
			res, err := tx.ExecContext(ctx, `
				INSERT INTO processed_callbacks (callback_id, order_id, callback_type)
				VALUES ($1, $2, $3) ON CONFLICT (callback_id) DO NOTHING`, cb.ID, id, cb.Type)
			if err != nil {
				return fmt.Errorf("record callback %s: %w", cb.ID, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("record callback %s: %w", cb.ID, err)
			} else if n == 0 {
				return nil // already processed
			}
		}
		work := o.Clone()
		events, err := change(work)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		if want := o.Version + int64(len(events)); work.Version != want {
			return fmt.Errorf("order %s: %d events moved version %d to %d", id, len(events), o.Version, work.Version)
		}
		msgs, err := r.messages(ctx, work, events)
		if err != nil {
			return err
		}
		updated, err := outbox.AddWith(ctx, tx, `
			UPDATE orders
			SET status = $3, version = $4, payment_id = NULLIF($5, ''), refunded_amount = $6, reason = $7, updated_at = now()
			WHERE order_id = $1 AND version = $2`,
			[]any{id, o.Version, work.Status, work.Version, work.PaymentID, work.RefundedAmount(), work.Reason}, msgs...)
		if err != nil {
			return fmt.Errorf("update order %s: %w", id, err)
		}
		if !updated {
			return fmt.Errorf("%w: %s at version %d", order.ErrConcurrentUpdate, id, o.Version)
		}
		if err := saveRefunds(ctx, tx, work); err != nil {
			return err
		}
		if err := r.failPoints.Inject(FailPointBeforeCommit); err != nil {
			return err
		}
		changed = work
		return nil
	})
	if err != nil {
		return current, err
	}
	if changed != nil {
		r.committed()
		return changed, nil
	}
	return current, nil
}

// FenceVersion runs fence on a copy of order id under its row lock and
// writes the version it reached in one transaction, with no event: the
// version fence reconciliation puts on an order restored from an earlier
// backup. updated_at moves with it, so the next scheduled run looks at the
// order again. A fence that does not raise the version writes nothing.
func (r *Repository) FenceVersion(ctx context.Context, id string, fence app.Fence) (*order.Order, error) {
	var out *order.Order
	err := postgres.InTx(ctx, r.db, func(tx *sqlx.Tx) error {
		o, err := get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		out = o
		work := o.Clone()
		moved, err := fence(work)
		if err != nil || !moved {
			return err
		}
		res, err := tx.ExecContext(ctx, `
			UPDATE orders SET version = $3, updated_at = now()
			WHERE order_id = $1 AND version = $2`, id, o.Version, work.Version)
		if err != nil {
			return fmt.Errorf("fence order %s: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("fence order %s: %w", id, err)
		} else if n != 1 {
			return fmt.Errorf("%w: %s at version %d", order.ErrConcurrentUpdate, id, o.Version)
		}
		out = work
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// messages are the outbox messages of events, o's changes, written with
// the change that made them (outbox.AddWith), so the order's row and its
// events are one statement.
func (r *Repository) messages(ctx context.Context, o *order.Order, events []order.Event) ([]outbox.Message, error) {
	traceID := observability.TraceID(ctx)
	msgs := make([]outbox.Message, 0, len(events))
	for _, e := range events {
		env, err := Envelope(o, e, traceID)
		if err != nil {
			return nil, err
		}
		msg, err := outbox.FromEnvelope(r.topic, env)
		if err != nil {
			return nil, fmt.Errorf("outbox message for %s: %w", e.Type, err)
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// Get returns order id or order.ErrNotFound.
func (r *Repository) Get(ctx context.Context, id string) (*order.Order, error) {
	return get(ctx, r.db, id, false)
}

// eventRow is one outbox row of an order (app.EventRecord).
type eventRow struct {
	EventID          string     `db:"event_id"`
	EventType        string     `db:"event_type"`
	AggregateVersion int64      `db:"aggregate_version"`
	Status           string     `db:"status"`
	Attempts         int        `db:"attempts"`
	CreatedAt        time.Time  `db:"created_at"`
	SentAt           *time.Time `db:"sent_at"`
}

// Events returns the outbox rows of order id in the order they were written.
func (r *Repository) Events(ctx context.Context, id string) ([]app.EventRecord, error) {
	var rows []eventRow
	if err := r.db.SelectContext(ctx, &rows, `
		SELECT event_id, event_type, aggregate_version, status, attempts, created_at, sent_at
		FROM outbox_events WHERE aggregate_id = $1 ORDER BY id`, id); err != nil {
		return nil, fmt.Errorf("list events of order %s: %w", id, err)
	}
	out := make([]app.EventRecord, len(rows))
	for i, row := range rows {
		out[i] = app.EventRecord(row)
	}
	return out, nil
}

const selectRecords = `
	SELECT order_id, customer_id, currency, amount, status, version, items, payment_id, reason, created_at, updated_at
	FROM orders`

// Records returns the stored orders among ids, by id, read with three
// statements in one snapshot whatever their number: the orders, their
// refunds and their outbox rows. An id the service never saw is absent.
func (r *Repository) Records(ctx context.Context, ids []string) (map[string]app.Record, error) {
	var recs []app.Record
	err := postgres.InSnapshot(ctx, r.db, func(tx *sqlx.Tx) error {
		var rows []orderRow
		if err := tx.SelectContext(ctx, &rows, selectRecords+` WHERE order_id = ANY($1)`, pq.Array(ids)); err != nil {
			return fmt.Errorf("load %d orders: %w", len(ids), err)
		}
		var err error
		recs, err = records(ctx, tx, rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]app.Record, len(recs))
	for _, rec := range recs {
		out[rec.Order.ID] = rec
	}
	return out, nil
}

// Unknown returns those of ids no order has, in the order given (a
// repeated id as often as it is given): one look-up of the primary key.
func (r *Repository) Unknown(ctx context.Context, ids []string) ([]string, error) {
	var known []string
	if err := r.db.SelectContext(ctx, &known, `SELECT order_id FROM orders WHERE order_id = ANY($1)`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("look up %d orders: %w", len(ids), err)
	}
	seen := make(map[string]bool, len(known))
	for _, id := range known {
		seen[id] = true
	}
	unknown := []string{}
	for _, id := range ids {
		if !seen[id] {
			unknown = append(unknown, id)
		}
	}
	return unknown, nil
}

// ChangedOrders returns the page p selects, in (updated_at, order_id)
// order, read like Records. The row comparison walks the orders_updated
// index, and UpdatedAt keeps Postgres's microseconds, so the last record's
// (UpdatedAt, ID) continues the walk exactly.
func (r *Repository) ChangedOrders(ctx context.Context, p app.ChangedPage) ([]app.Record, error) {
	before := sql.NullTime{Time: p.Before, Valid: !p.Before.IsZero()}
	var recs []app.Record
	err := postgres.InSnapshot(ctx, r.db, func(tx *sqlx.Tx) error {
		var rows []orderRow
		if err := tx.SelectContext(ctx, &rows, selectRecords+`
			WHERE (updated_at, order_id) > ($1, $2) AND ($3::timestamptz IS NULL OR updated_at < $3)
			ORDER BY updated_at, order_id
			LIMIT $4`, p.After, p.AfterID, before, p.Limit); err != nil {
			return fmt.Errorf("page orders changed after %s %q: %w", p.After.Format(time.RFC3339Nano), p.AfterID, err)
		}
		var err error
		recs, err = records(ctx, tx, rows)
		return err
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// records completes rows with their refunds and outbox rows: two
// statements for all of them.
func records(ctx context.Context, tx *sqlx.Tx, rows []orderRow) ([]app.Record, error) {
	if len(rows) == 0 {
		return []app.Record{}, nil
	}
	ids := make([]string, len(rows))
	recs := make([]app.Record, len(rows))
	at := make(map[string]int, len(rows))
	for i, row := range rows {
		o, err := row.order()
		if err != nil {
			return nil, err
		}
		ids[i], at[row.OrderID] = row.OrderID, i
		recs[i] = app.Record{Order: o, CreatedAt: row.CreatedAt.UTC(), UpdatedAt: row.UpdatedAt.UTC(), Events: []outbox.Event{}}
	}
	var refunds []refundRow
	if err := tx.SelectContext(ctx, &refunds, `
		SELECT refund_id, order_id, kind, payment_id, amount, currency, items, status, reason, requested_by
		FROM order_refunds WHERE order_id = ANY($1) ORDER BY order_id, requested_at, refund_id`, pq.Array(ids)); err != nil {
		return nil, fmt.Errorf("load refunds of %d orders: %w", len(ids), err)
	}
	for _, rf := range refunds {
		if err := rf.addTo(recs[at[rf.OrderID]].Order); err != nil {
			return nil, err
		}
	}
	events, err := outbox.ForAggregates(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	for id, es := range events {
		recs[at[id]].Events = es
	}
	return recs, nil
}

type orderRow struct {
	OrderID    string          `db:"order_id"`
	CustomerID string          `db:"customer_id"`
	Currency   string          `db:"currency"`
	Amount     decimal.Decimal `db:"amount"`
	Status     string          `db:"status"`
	Version    int64           `db:"version"`
	Items      []byte          `db:"items"`
	PaymentID  sql.NullString  `db:"payment_id"`
	Reason     string          `db:"reason"`
	CreatedAt  time.Time       `db:"created_at"`
	UpdatedAt  time.Time       `db:"updated_at"`
}

type refundRow struct {
	RefundID  string          `db:"refund_id"`
	OrderID   string          `db:"order_id"`
	Kind      string          `db:"kind"`
	PaymentID string          `db:"payment_id"`
	Amount    decimal.Decimal `db:"amount"`
	Currency  string          `db:"currency"`
	Items     []byte          `db:"items"`
	Status    string          `db:"status"`
	Reason    string          `db:"reason"`
	// RequestedBy is the operator who asked; empty for the customer.
	RequestedBy string `db:"requested_by"`
}

// lineJSON is the stored form of goods a refund returns.
type lineJSON struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// itemJSON is the stored form of an order line: money as a decimal string.
type itemJSON struct {
	SKU       string      `json:"sku"`
	Quantity  int         `json:"quantity"`
	UnitPrice event.Money `json:"unitPrice"`
}

// get loads order id with its refunds in one statement: every command
// of the order service loads the order it changes, and a second round
// trip for its refunds, which most orders do not have, would be one in
// seven of the order database's statements under load.
func get(ctx context.Context, q sqlx.QueryerContext, id string, forUpdate bool) (*order.Order, error) {
	query := `
		SELECT o.order_id, o.customer_id, o.currency, o.amount, o.status, o.version, o.items, o.payment_id, o.reason, o.updated_at,
		       COALESCE((SELECT json_agg(json_build_object(
		                     'refund_id', r.refund_id, 'kind', r.kind, 'payment_id', r.payment_id,
		                     'amount', r.amount::text, 'currency', r.currency, 'items', r.items, 'status', r.status,
		                     'reason', r.reason, 'requested_by', r.requested_by) ORDER BY r.requested_at, r.refund_id)
		                 FROM order_refunds r WHERE r.order_id = o.order_id), '[]') AS refunds
		FROM orders o WHERE o.order_id = $1`
	if forUpdate {
		query += ` FOR UPDATE OF o`
	}
	var row struct {
		orderRow
		Refunds []byte `db:"refunds"`
	}
	err := sqlx.GetContext(ctx, q, &row, query, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: %s", order.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load order %s: %w", id, err)
	}
	o, err := row.order()
	if err != nil {
		return nil, err
	}
	var refunds []refundJSON
	if err := json.Unmarshal(row.Refunds, &refunds); err != nil {
		return nil, fmt.Errorf("decode refunds of order %s: %w", id, err)
	}
	for _, r := range refunds {
		if err := r.row().addTo(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// refundJSON is a refund as get reads it, one object of a json_agg: the
// amount as text, so that its scale survives, and the items as they are
// stored.
type refundJSON struct {
	RefundID    string          `json:"refund_id"`
	Kind        string          `json:"kind"`
	PaymentID   string          `json:"payment_id"`
	Amount      decimal.Decimal `json:"amount"`
	Currency    string          `json:"currency"`
	Items       json.RawMessage `json:"items"`
	Status      string          `json:"status"`
	Reason      string          `json:"reason"`
	RequestedBy string          `json:"requested_by"`
}

func (r refundJSON) row() refundRow {
	return refundRow{RefundID: r.RefundID, Kind: r.Kind, PaymentID: r.PaymentID, Amount: r.Amount, Currency: r.Currency,
		Items: r.Items, Status: r.Status, Reason: r.Reason, RequestedBy: r.RequestedBy}
}

func (row orderRow) order() (*order.Order, error) {
	var items []itemJSON
	if err := json.Unmarshal(row.Items, &items); err != nil {
		return nil, fmt.Errorf("decode items of order %s: %w", row.OrderID, err)
	}
	o := &order.Order{
		ID:         row.OrderID,
		CustomerID: row.CustomerID,
		Currency:   row.Currency,
		Amount:     row.Amount,
		Status:     order.Status(row.Status),
		Version:    row.Version,
		PaymentID:  row.PaymentID.String,
		Reason:     row.Reason,
		Items:      make([]order.Item, len(items)),
		Refunds:    []order.Refund{},
	}
	for i, it := range items {
		o.Items[i] = order.Item{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: it.UnitPrice.Decimal}
	}
	return o, nil
}

func (r refundRow) addTo(o *order.Order) error {
	var lines []lineJSON
	if err := json.Unmarshal(r.Items, &lines); err != nil {
		return fmt.Errorf("decode items of refund %s: %w", r.RefundID, err)
	}
	ref := order.Refund{ID: r.RefundID, Kind: order.RefundKind(r.Kind), PaymentID: r.PaymentID, Amount: r.Amount,
		Currency: r.Currency, Items: make([]order.Line, len(lines)), Status: order.RefundStatus(r.Status), Reason: r.Reason,
		RequestedBy: r.RequestedBy}
	for i, l := range lines {
		ref.Items[i] = order.Line{SKU: l.SKU, Quantity: l.Quantity}
	}
	o.Refunds = append(o.Refunds, ref)
	return nil
}

// saveRefunds writes the refunds of o in one statement: new ones are
// inserted, settled ones get their status and settlement time.
func saveRefunds(ctx context.Context, tx *sqlx.Tx, o *order.Order) error {
	if len(o.Refunds) == 0 {
		return nil
	}
	var ids, kinds, payments, amounts, currencies, items, statuses, reasons, operators []string
	for _, r := range o.Refunds {
		lines := make([]lineJSON, len(r.Items))
		for i, l := range r.Items {
			lines[i] = lineJSON{SKU: l.SKU, Quantity: l.Quantity}
		}
		raw, err := json.Marshal(lines)
		if err != nil {
			return fmt.Errorf("encode items of refund %s: %w", r.ID, err)
		}
		ids = append(ids, r.ID)
		kinds = append(kinds, string(r.Kind))
		payments = append(payments, r.PaymentID)
		amounts = append(amounts, r.Amount.String())
		currencies = append(currencies, r.Currency)
		items = append(items, string(raw))
		statuses = append(statuses, string(r.Status))
		reasons = append(reasons, r.Reason)
		operators = append(operators, r.RequestedBy)
	}
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO order_refunds (refund_id, order_id, kind, payment_id, amount, currency, items, status, reason, requested_by)
		SELECT r.id, $1, r.kind, r.payment, r.amount, r.currency, r.items, r.status, r.reason, r.operator
		FROM unnest($2::text[], $3::text[], $4::text[], $5::numeric[], $6::text[], $7::jsonb[], $8::text[], $9::text[], $10::text[])
		     AS r(id, kind, payment, amount, currency, items, status, reason, operator)
		ON CONFLICT (refund_id) DO UPDATE
		SET amount = EXCLUDED.amount, status = EXCLUDED.status, reason = EXCLUDED.reason,
		    settled_at = CASE WHEN EXCLUDED.status <> order_refunds.status THEN now() ELSE order_refunds.settled_at END`,
		o.ID, pq.Array(ids), pq.Array(kinds), pq.Array(payments), pq.Array(amounts), pq.Array(currencies),
		pq.Array(items), pq.Array(statuses), pq.Array(reasons), pq.Array(operators)); err != nil {
		return fmt.Errorf("save refunds of order %s: %w", o.ID, err)
	}
	return nil
}

func encodeItems(items []order.Item) ([]byte, error) {
	out := make([]itemJSON, len(items))
	for i, it := range items {
		out[i] = itemJSON{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: event.NewMoney(it.UnitPrice)}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode items: %w", err)
	}
	return raw, nil
}
