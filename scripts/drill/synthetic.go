package drill

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
)

// A synthetic order is one the order service never held, or never held as
// the other services think: a case plants it by publishing its events
// straight to the broker, or by playing the payment service with signed
// callbacks for a payment the payment service never took. Its rows would
// stay behind as findings of every later reconciliation run over all orders
// (ORPHAN_EFFECT, MISSING_EFFECT), so once the case's verdict is taken the
// drill removes them, service by service, straight from the databases —
// the second place a drill writes one (docs/drills.md, What a drill may
// touch). Every statement is here.

// plantedTable is a table whose rows name their order in orderColumn;
// eventColumn, if set, names the event each row came from, whose dedup
// rows go with it. The tables are those of the schema that creates them:
// the services' own migrations (services/*/migrations) and the shared ones
// of pkg/outbox, pkg/inbox, pkg/versionguard and pkg/dlq.
type plantedTable struct {
	name, orderColumn, eventColumn string
}

// consumerTables are the tables pkg/service.NewConsumer migrates into every
// consumer's database, in the order they are emptied. Dead letters go
// after their replay audit, which references them; the dedup rows
// (processed_events, keyed by event alone) are removed last, by the event
// ids the other tables and the case name.
func consumerTables() []plantedTable {
	return []plantedTable{
		{"parked_events", "aggregate_id", "event_id"},
		{"dead_letters", "aggregate_id", "event_id"},
		{"aggregate_versions", "aggregate_id", ""},
	}
}

// plantedTables lists, for each service, every table of its database that
// holds rows of one order, in the order they are emptied (a table before
// the one its rows reference). A service without an entry keeps nothing
// of an order.
func plantedTables(service string) []plantedTable {
	outbox := plantedTable{"outbox_events", "aggregate_id", "event_id"}
	switch service {
	case Order:
		return []plantedTable{outbox, {"processed_callbacks", "order_id", ""}, {"order_refunds", "order_id", ""}, {"orders", "order_id", ""}}
	case Payment:
		return append(consumerTables(), outbox, plantedTable{"refunds", "order_id", ""}, plantedTable{"payments", "order_id", ""})
	case Inventory:
		return append(consumerTables(), outbox,
			plantedTable{"stock_movements", "order_id", "event_id"}, plantedTable{"inventory_orders", "order_id", ""})
	case Points:
		return append(consumerTables(), plantedTable{"points_ledger", "order_id", "event_id"})
	case Notification:
		return append(consumerTables(), plantedTable{"notifications", "order_id", "event_id"})
	case Reconciliation:
		// The convergence monitor's watch of an order the order service no
		// longer holds would stay unconverged for ever. Runs and findings
		// are the audit of what reconciliation saw, and stay.
		return []plantedTable{{"convergence_watch", "order_id", ""}}
	}
	return nil
}

// The statements beyond a plain delete by order.
const (
	// The order service's events of the orders: the dedup rows every
	// consumer keeps of them carry their ids alone.
	sqlOrderEventIDs = `SELECT event_id FROM outbox_events WHERE aggregate_id = ANY($1)`
	// A planted order's stock goes back to its SKUs: what its movements
	// took from available, and added to deducted, is undone, so the stock
	// is what the other orders' movements make it.
	sqlGiveStockBack = `UPDATE stock AS s
		SET available = greatest(s.available - m.delta, 0), deducted = greatest(s.deducted + m.delta, 0), updated_at = now()
		FROM (SELECT sku, sum(delta) AS delta FROM stock_movements WHERE order_id = ANY($1) GROUP BY sku) AS m
		WHERE s.sku = m.sku`
	sqlDeleteReplays = `DELETE FROM dlq_replays WHERE dead_letter_id IN
		(SELECT id FROM dead_letters WHERE aggregate_id = ANY($1))`
	sqlDeleteProcessed = `DELETE FROM processed_events WHERE event_id = ANY($1)`
)

// Removed is what RemovePlanted removed.
type Removed struct {
	// Rows counts the rows deleted, every database together.
	Rows int64
	// Services are the services whose databases were cleaned; Missing
	// those that hold an order's rows but had no database URL.
	Services, Missing []string
}

// RemovePlanted deletes every row of orderIDs from the services'
// databases (URLs by service short name): effects, ledgers,
// notifications, stock movements and records (their stock given back),
// outboxes, dead letters, parked events, version guards, the dedup rows
// of the orders' events (eventIDs, and those the databases name), and at
// the order service the orders themselves. Each database is cleaned in
// one transaction; a service without a URL is skipped and listed.
func RemovePlanted(ctx context.Context, databases map[string]string, orderIDs, eventIDs []string) (Removed, error) {
	var out Removed
	if len(orderIDs) == 0 {
		return out, nil
	}
	events := slices.Clone(eventIDs)
	if dsn := databases[Order]; dsn != "" {
		ids, err := orderEventIDs(ctx, dsn, orderIDs)
		if err != nil {
			return out, err
		}
		events = append(events, ids...)
	}
	// The order service last, so a cleanup that fails half-way still finds
	// the ids of its events there when run again.
	for _, service := range []string{Payment, Inventory, Points, Notification, Reconciliation, Order} {
		dsn := databases[service]
		if dsn == "" {
			out.Missing = append(out.Missing, service)
			continue
		}
		n, err := removeFrom(ctx, dsn, service, orderIDs, events)
		if err != nil {
			return out, fmt.Errorf("remove planted orders from %s: %w", service, err)
		}
		out.Rows += n
		out.Services = append(out.Services, service)
	}
	return out, nil
}

// orderEventIDs reads the ids of the order service's events of the orders.
func orderEventIDs(ctx context.Context, dsn string, orderIDs []string) ([]string, error) {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var ids []string
	if err := db.SelectContext(ctx, &ids, sqlOrderEventIDs, pq.Array(orderIDs)); err != nil {
		return nil, fmt.Errorf("read the planted orders' events: %w", err)
	}
	return ids, nil
}

// removeFrom cleans one service's database in one transaction and returns
// how many rows it deleted.
func removeFrom(ctx context.Context, dsn, service string, orderIDs, eventIDs []string) (int64, error) {
	db, err := sqlx.Open("postgres", dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	orders := pq.Array(orderIDs)
	var removed int64
	err = postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		exec := func(q string, arg any) error {
			res, err := tx.ExecContext(ctx, q, arg)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			removed += n
			return err
		}
		consumer := service != Order && service != Reconciliation
		if service == Inventory {
			if _, err := tx.ExecContext(ctx, sqlGiveStockBack, orders); err != nil {
				return fmt.Errorf("give stock back: %w", err)
			}
		}
		if consumer {
			if err := exec(sqlDeleteReplays, orders); err != nil {
				return fmt.Errorf("dlq_replays: %w", err)
			}
		}
		events := slices.Clone(eventIDs)
		for _, t := range plantedTables(service) {
			// Each row deleted names its event, if t has them, else its order.
			var ids []string
			del := "DELETE FROM " + t.name + " WHERE " + t.orderColumn + " = ANY($1) RETURNING " + cmp.Or(t.eventColumn, t.orderColumn)
			if err := tx.SelectContext(ctx, &ids, del, orders); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			removed += int64(len(ids))
			if t.eventColumn != "" {
				events = append(events, ids...)
			}
		}
		if consumer {
			if err := exec(sqlDeleteProcessed, pq.Array(events)); err != nil {
				return fmt.Errorf("processed_events: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return removed, nil
}

// plantings are the synthetic orders a case planted and the ids of the
// events it built for them.
type plantings struct {
	mu     sync.Mutex
	orders []string
	events []string
}

func (p *plantings) add(orderID string, eventIDs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if orderID != "" && !slices.Contains(p.orders, orderID) {
		p.orders = append(p.orders, orderID)
	}
	p.events = append(p.events, eventIDs...)
}

func (p *plantings) list() (orders, events []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.orders), slices.Clone(p.events)
}

// newOrderEvents builds the events of a synthetic order, as the order
// service would emit them, and records the order and each event built as
// planted.
func (s *session) newOrderEvents(orderID, sku string, quantity int, amount string) orderEvents {
	m, err := event.ParseMoney(amount)
	checkf(err, "amount %q", amount)
	s.plants.add(orderID)
	return orderEvents{orderID: orderID, sku: sku, quantity: quantity, amount: m, plants: &s.plants}
}

// cleanupTimeout bounds the removal of a case's planted orders. It runs on
// a context of its own, so a run interrupted with Ctrl-C still cleans up.
const cleanupTimeout = 30 * time.Second

// removePlanted removes the rows of the orders the case planted, unless
// the target keeps them, and says what became of them for the result
// line ("" when the case planted none).
func (s *session) removePlanted() (string, error) {
	orders, events := s.plants.list()
	if len(orders) == 0 {
		return "", nil
	}
	what := fmt.Sprintf("%d planted order", len(orders))
	if len(orders) > 1 {
		what += "s"
	}
	if s.t.KeepPlanted {
		return what + " kept (keep-planted): " + strings.Join(orders, " "), nil
	}
	if len(s.t.Databases) == 0 {
		return what + " kept: no database URLs, cleanup skipped", nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), cleanupTimeout)
	defer cancel()
	removed, err := RemovePlanted(ctx, s.t.Databases, orders, events)
	if err != nil {
		return "", fmt.Errorf("%s left behind: %w", what, err)
	}
	note := fmt.Sprintf("%s removed (%d rows)", what, removed.Rows)
	if len(removed.Missing) > 0 {
		note += "; no database URL of " + strings.Join(removed.Missing, ", ") + ", its rows kept"
	}
	return note, nil
}

// withCleanup adds the note of removePlanted to a result, or its error,
// which fails the case: rows a case was to remove and left behind are
// findings of the next reconciliation run.
func withCleanup(r Result, note string, err error) Result {
	if err != nil {
		r.Pass, r.Skipped = false, false
		r.Seen = strings.TrimPrefix(r.Seen+"; "+err.Error(), "; ")
		return r
	}
	if note != "" {
		r.Seen = strings.TrimPrefix(r.Seen+"; "+note, "; ")
	}
	return r
}
