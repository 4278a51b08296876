package backlog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

// Check is one promise of the drill and whether the run kept it.
type Check struct {
	Name string `json:"name"`
	Pass bool   `json:"pass"`
	// Want is the expected figure, Got the one seen.
	Want string `json:"want"`
	Got  string `json:"got"`
}

// appName marks the drill's own database connections, so the connection
// counts leave them out.
const appName = "backlog-drill"

// openDB opens a small pool on database of the server at serverURL.
func openDB(serverURL, database string) (*sql.DB, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	u.Path = "/" + database
	q := u.Query()
	q.Set("application_name", appName)
	u.RawQuery = q.Encode()
	db, err := sql.Open("postgres", u.String())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", database, err)
	}
	// The drill's queries run one at a time; it leaves the server's
	// connections to the services.
	db.SetMaxOpenConns(1)
	return db, nil
}

// connections counts the services' database connections, the drill's own
// left out: open ones, and those in use (not idle); and every client
// connection to the server, to hold against max_connections.
func (d *drill) connections(ctx context.Context) ([]Connections, int, error) {
	names := make([]string, 0, len(d.watched))
	for _, s := range d.watched {
		names = append(names, d.t.Databases[s])
	}
	rows, err := d.server.QueryContext(ctx, `
		SELECT coalesce(datname, ''), count(*), count(*) FILTER (WHERE state IS DISTINCT FROM 'idle'),
		       coalesce(datname = ANY($1) AND application_name <> $2, false)
		FROM pg_stat_activity
		WHERE backend_type = 'client backend'
		GROUP BY 1, 4`, pq.Array(names), appName)
	if err != nil {
		return nil, 0, fmt.Errorf("pg_stat_activity: %w", err)
	}
	defer rows.Close()
	got := map[string]Connections{}
	total := 0
	for rows.Next() {
		var c Connections
		var service bool
		if err := rows.Scan(&c.Database, &c.Open, &c.InUse, &service); err != nil {
			return nil, 0, fmt.Errorf("pg_stat_activity: %w", err)
		}
		total += c.Open
		if service {
			got[c.Database] = c
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("pg_stat_activity: %w", err)
	}
	out := make([]Connections, len(names))
	for i, n := range names {
		out[i] = got[n]
		out[i].Database = n
	}
	return out, total, nil
}

// maxConnections is the server's max_connections.
func (d *drill) maxConnections(ctx context.Context) (int, error) {
	var n int
	if err := d.server.QueryRowContext(ctx, `SELECT current_setting('max_connections')::int`).Scan(&n); err != nil {
		return 0, fmt.Errorf("max_connections: %w", err)
	}
	return n, nil
}

// runIDs are the ids of the run's events, orders and SKUs, and the model
// the checks hold the services' databases against: what each service
// handles, what was published twice, each order's shape, and how many
// units of each SKU the run's orders keep.
type runIDs struct {
	events, orders, skus []string
	units                map[string]int
	// shapes is the shape of each order, as orders.
	shapes []loadgen.Shape
	// handled are, per service, the run's events it has a transition for;
	// republished those of them published twice.
	handled, republished map[string][]string
	mix                  bool
}

func newRunIDs(cfg Config) runIDs {
	r := runIDs{units: map[string]int{}, handled: map[string][]string{}, republished: map[string][]string{}, mix: cfg.Mix}
	handle := func(id string, services ...string) {
		for _, s := range services {
			r.handled[s] = append(r.handled[s], id)
			if cfg.Mix && loadgen.Republished(id) {
				r.republished[s] = append(r.republished[s], id)
			}
		}
	}
	for i := 1; i <= cfg.Count; i++ {
		paid, sku := loadgen.EventID(cfg.RunID, i), loadgen.SKUFor(cfg.RunID, i, cfg.SKUs)
		r.events = append(r.events, paid)
		r.orders = append(r.orders, loadgen.OrderID(cfg.RunID, i))
		handle(paid, Inventory, Points, Notification)
		shape := loadgen.ShapePaid
		if cfg.Mix {
			shape = loadgen.ShapeOf(i)
		}
		r.shapes = append(r.shapes, shape)
		switch shape {
		case loadgen.ShapeRefunded:
			refund := loadgen.RefundEventID(cfg.RunID, i)
			r.events = append(r.events, refund)
			handle(refund, Inventory, Points, Notification)
		case loadgen.ShapeRefundRejected:
			refund := loadgen.RefundEventID(cfg.RunID, i)
			r.events = append(r.events, refund)
			handle(refund, Notification)
			r.units[sku] += loadgen.ItemQuantity
		default:
			r.units[sku] += loadgen.ItemQuantity
		}
	}
	for k := 1; k <= min(cfg.SKUs, cfg.Count); k++ {
		r.skus = append(r.skus, loadgen.SKU(cfg.RunID, k))
	}
	return r
}

// copies is how many of the run's events are published twice.
func (r runIDs) copies() int {
	n := 0
	for _, id := range r.events {
		if r.mix && loadgen.Republished(id) {
			n++
		}
	}
	return n
}

// count is how many orders have shape.
func (r runIDs) count(shape loadgen.Shape) int {
	n := 0
	for _, s := range r.shapes {
		if s == shape {
			n++
		}
	}
	return n
}

// perOrder is, for each order, f of its shape.
func (r runIDs) perOrder(f func(loadgen.Shape) int64) []int64 {
	out := make([]int64, len(r.shapes))
	for i, s := range r.shapes {
		out[i] = f(s)
	}
	return out
}

// refunded and answered say whether an order's refund moves goods and
// points, and whether the customer hears of it.
func refunded(s loadgen.Shape) bool { return s == loadgen.ShapeRefunded }
func answered(s loadgen.Shape) bool { return s != loadgen.ShapePaid }

// used reports whether a consumer has already recorded the run's first
// event: the run id was used before, and the checks would count twice.
func (d *drill) used(ctx context.Context) (string, error) {
	first := loadgen.EventID(d.cfg.RunID, 1)
	for _, s := range d.cfg.Services {
		var n int
		if err := d.dbs[s].QueryRowContext(ctx, `SELECT count(*) FROM processed_events WHERE event_id = $1`, first).Scan(&n); err != nil {
			return "", fmt.Errorf("%s database: %w", s, err)
		}
		if n > 0 {
			return s, nil
		}
	}
	return "", nil
}

// accounted counts, per verified service, the run's events it has either
// recorded (a dedup row) or dead-lettered: the drain is over once each
// equals the events it handles.
func (d *drill) accounted(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, s := range d.cfg.Services {
		var n int
		err := d.dbs[s].QueryRowContext(ctx, `
			SELECT count(*) FROM (
				SELECT event_id FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)
				UNION
				SELECT event_id FROM dead_letters WHERE consumer = $1 AND event_id = ANY($2)) x`,
			d.t.Groups[s], pq.Array(d.ids.handled[s])).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("%s database: %w", s, err)
		}
		out[s] = n
	}
	return out, nil
}

// verify checks, with read-only queries against each service's own
// database, that every event of the run had its effect exactly once.
func (d *drill) verify(ctx context.Context) ([]Check, error) {
	var checks []Check
	for _, service := range d.cfg.Services {
		v := verifying{service: service, group: d.t.Groups[service], ids: d.ids, handled: d.ids.handled[service],
			orders: len(d.ids.orders), refunded: d.ids.count(loadgen.ShapeRefunded), rejected: d.ids.count(loadgen.ShapeRefundRejected)}
		for _, dc := range dbChecks {
			if (dc.mix && !v.ids.mix) || (len(dc.services) > 0 && !slices.Contains(dc.services, service)) {
				continue
			}
			n, err := counts(ctx, d.dbs[service], dc.query, dc.args(v)...)
			if err != nil {
				return checks, fmt.Errorf("verify %s: %w", service, err)
			}
			c := dc.judge(v, n)
			c.Name = service + ": " + c.Name
			checks = append(checks, c)
		}
	}
	return checks, nil
}

// verifying is one service's side of the run, as the checks see it.
type verifying struct {
	service, group string
	ids            runIDs
	// handled are the run's events the service has a transition for.
	handled []string
	// orders, refunded and rejected count the run's orders, those of them
	// refunded and those whose refund was rejected.
	orders, refunded, rejected int
}

// perOrder is, for each order, 1 and one more when more applies to its
// shape: the count of an effect table's rows the order must have.
func (v verifying) perOrder(more func(loadgen.Shape) bool) any {
	return pq.Array(v.ids.perOrder(func(s loadgen.Shape) int64 {
		if more(s) {
			return 2
		}
		return 1
	}))
}

// pick is paid in a run of OrderPaid events alone, mixed in a mixed one.
func (v verifying) pick(paid, mixed string) string {
	if v.ids.mix {
		return mixed
	}
	return paid
}

// dbCheck is one check of a service's database: query counts what the
// check needs over args, judge holds the counts against the run.
type dbCheck struct {
	// services are the services it applies to, none every one; mix says
	// it applies to mixed runs only.
	services []string
	mix      bool
	query    string
	args     func(v verifying) []any
	judge    func(v verifying, n []int) Check
}

// ordersOff is a column counting the orders whose rows of table (order_id
// = ANY($2)) are not the count of $3: an order with an effect too many
// (even under another event id) or one too few.
func ordersOff(table string) string {
	return `(SELECT count(*) FROM unnest($2::text[], $3::bigint[]) AS w(order_id, n)
		LEFT JOIN (SELECT order_id, count(*) FROM ` + table + ` WHERE order_id = ANY($2) GROUP BY order_id) AS g(order_id, n) USING (order_id)
		WHERE coalesce(g.n, 0) <> w.n)`
}

// dbChecks are the exactly-once checks, in the order of the report.
var dbChecks = []dbCheck{{
	// An event parked until its predecessor came keeps the outcome
	// WAITING_FOR_GAP in its dedup row; no parked event may remain (per-order
	// order held), so it was applied then.
	query: `SELECT count(*), count(*) FILTER (WHERE outcome = 'APPLIED'), count(*) FILTER (WHERE outcome = 'WAITING_FOR_GAP')
		FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`,
	args: func(v verifying) []any { return []any{v.group, pq.Array(v.handled)} },
	judge: func(v verifying, n []int) Check {
		recorded, applied, afterGap, want := n[0], n[1], n[2], len(v.handled)
		return Check{Name: "every event recorded once and applied", Pass: recorded == want && applied+afterGap == want,
			Want: v.pick(fmt.Sprintf("%d dedup rows, %d APPLIED", want, want), fmt.Sprintf("%d dedup rows, each APPLIED or applied after WAITING_FOR_GAP", want)),
			Got: v.pick(fmt.Sprintf("%d dedup rows, %d APPLIED", recorded, applied),
				fmt.Sprintf("%d dedup rows, %d APPLIED, %d after WAITING_FOR_GAP, %d other", recorded, applied, afterGap, recorded-applied-afterGap))}
	},
}, {
	// A rebalance redelivers what was not committed yet, so a consumer may
	// count more duplicates than were published; every republished event
	// must be among them.
	mix: true,
	query: `SELECT count(*) FILTER (WHERE duplicates > 0 AND event_id = ANY($3)), coalesce(sum(duplicates), 0)
		FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`,
	args: func(v verifying) []any {
		return []any{v.group, pq.Array(v.handled), pq.Array(v.ids.republished[v.service])}
	},
	judge: func(v verifying, n []int) Check {
		seen, dups, want := n[0], n[1], len(v.ids.republished[v.service])
		return Check{Name: "every republished event recognised as a duplicate", Pass: seen == want && dups >= want,
			Want: fmt.Sprintf("%d of %d, at least %d DUPLICATE", want, want, want),
			Got:  fmt.Sprintf("%d of %d, %d DUPLICATE (%d from redeliveries)", seen, want, dups, dups-seen)}
	},
}, {
	services: []string{Inventory},
	query: `SELECT count(*) FILTER (WHERE kind = 'DEDUCT'), count(DISTINCT event_id) FILTER (WHERE kind = 'DEDUCT'),
		       count(*) FILTER (WHERE kind = 'RESTOCK'), count(DISTINCT event_id) FILTER (WHERE kind = 'RESTOCK'),
		       ` + ordersOff("stock_movements") + `
		FROM stock_movements WHERE event_id = ANY($1)`,
	args: func(v verifying) []any {
		return []any{pq.Array(v.handled), pq.Array(v.ids.orders), v.perOrder(refunded)}
	},
	judge: func(v verifying, n []int) Check {
		deducts, deductEvents, restocks, restockEvents, off := n[0], n[1], n[2], n[3], n[4]
		return Check{Name: v.pick("one deduction per event", "one deduction per payment, one restock per refund"),
			Pass: deducts == v.orders && deductEvents == v.orders && restocks == v.refunded && restockEvents == v.refunded && off == 0,
			Want: v.pick(fmt.Sprintf("%d movements of %d events, 0 orders off", v.orders, v.orders),
				fmt.Sprintf("%d DEDUCT of %d events, %d RESTOCK of %d events, 0 orders off", v.orders, v.orders, v.refunded, v.refunded)),
			Got: v.pick(fmt.Sprintf("%d movements of %d events, %d orders off", deducts+restocks, deductEvents+restockEvents, off),
				fmt.Sprintf("%d DEDUCT of %d events, %d RESTOCK of %d events, %d orders off", deducts, deductEvents, restocks, restockEvents, off))}
	},
}, {
	// A SKU without a stock row is off whatever its orders kept.
	services: []string{Inventory},
	query: `SELECT (SELECT coalesce(sum(-delta), 0) FROM stock_movements WHERE event_id = ANY($1)),
		       coalesce(sum(s.deducted), 0), count(*) FILTER (WHERE s.sku IS NULL OR s.deducted <> w.units)
		FROM unnest($2::text[], $3::bigint[]) AS w(sku, units) LEFT JOIN stock s USING (sku)`,
	args: func(v verifying) []any {
		units := make([]int64, len(v.ids.skus))
		for i, sku := range v.ids.skus {
			units[i] = int64(v.ids.units[sku])
		}
		return []any{pq.Array(v.handled), pq.Array(v.ids.skus), pq.Array(units)}
	},
	judge: func(v verifying, n []int) Check {
		moved, deducted, off, kept := n[0], n[1], n[2], 0
		for _, u := range v.ids.units {
			kept += u
		}
		return Check{Name: v.pick("stock deducted = sum of quantities", "stock deducted = sum of quantities kept"),
			Pass: moved == kept && deducted == kept && off == 0, Want: fmt.Sprintf("%d units deducted, every SKU as its orders", kept),
			Got: fmt.Sprintf("%d units moved, %d deducted, %d SKUs off", moved, deducted, off)}
	},
}, {
	services: []string{Points},
	query: `SELECT count(*) FILTER (WHERE entry_type = 'EARN'), count(DISTINCT order_id) FILTER (WHERE entry_type = 'EARN'),
		       count(*) FILTER (WHERE entry_type = 'REVERSAL'), count(DISTINCT order_id) FILTER (WHERE entry_type = 'REVERSAL'),
		       ` + ordersOff("points_ledger") + `
		FROM points_ledger WHERE event_id = ANY($1)`,
	args: func(v verifying) []any {
		return []any{pq.Array(v.handled), pq.Array(v.ids.orders), v.perOrder(refunded)}
	},
	judge: func(v verifying, n []int) Check {
		earn, earnOrders, reversals, reversalOrders, off := n[0], n[1], n[2], n[3], n[4]
		return Check{Name: v.pick("one ledger row per order", "ledger rows = earn + reversal"),
			Pass: earn == v.orders && earnOrders == v.orders && reversals == v.refunded && reversalOrders == v.refunded && off == 0,
			Want: v.pick(fmt.Sprintf("%d EARN rows for %d orders", v.orders, v.orders), fmt.Sprintf("%d EARN, %d REVERSAL, 0 orders off", v.orders, v.refunded)),
			Got:  fmt.Sprintf("%d EARN for %d orders, %d REVERSAL for %d orders, %d orders off", earn, earnOrders, reversals, reversalOrders, off)}
	},
}, {
	services: []string{Notification},
	query: `SELECT count(*) FILTER (WHERE kind = 'ORDER_PAID'), count(*) FILTER (WHERE kind = 'ORDER_REFUNDED'),
		       count(*) FILTER (WHERE kind = 'REFUND_REJECTED'), ` + ordersOff("notifications") + `
		FROM notifications WHERE event_id = ANY($1)`,
	args: func(v verifying) []any {
		return []any{pq.Array(v.handled), pq.Array(v.ids.orders), v.perOrder(answered)}
	},
	judge: func(v verifying, n []int) Check {
		paid, refundedN, rejected, off := n[0], n[1], n[2], n[3]
		return Check{Name: v.pick("one notification per order", "notifications per kind"),
			Pass: paid == v.orders && refundedN == v.refunded && rejected == v.rejected && off == 0,
			Want: v.pick(fmt.Sprintf("%d ORDER_PAID for %d orders", v.orders, v.orders),
				fmt.Sprintf("%d ORDER_PAID, %d ORDER_REFUNDED, %d REFUND_REJECTED, 0 orders off", v.orders, v.refunded, v.rejected)),
			Got: fmt.Sprintf("%d ORDER_PAID, %d ORDER_REFUNDED, %d REFUND_REJECTED, %d orders off", paid, refundedN, rejected, off)}
	},
}, {
	query: `SELECT count(*) FROM dead_letters WHERE consumer = $1 AND event_id = ANY($2)`,
	args:  func(v verifying) []any { return []any{v.group, pq.Array(v.ids.events)} },
	judge: func(_ verifying, n []int) Check {
		return Check{Name: "nothing dead-lettered", Pass: n[0] == 0, Want: "0 dead letters", Got: fmt.Sprintf("%d dead letters", n[0])}
	},
}, {
	query: `SELECT count(av.aggregate_id), count(*) FILTER (WHERE av.version = w.version),
		       (SELECT count(*) FROM parked_events WHERE consumer = $1 AND aggregate_id = ANY($2))
		FROM unnest($2::text[], $3::bigint[]) AS w(aggregate_id, version)
		JOIN aggregate_versions av ON av.consumer = $1 AND av.aggregate_id = w.aggregate_id`,
	args: func(v verifying) []any {
		last := v.ids.perOrder(func(s loadgen.Shape) int64 {
			if refunded(s) || (v.service == Notification && answered(s)) {
				return loadgen.RefundVersion
			}
			return loadgen.PaidVersion
		})
		return []any{v.group, pq.Array(v.ids.orders), pq.Array(last)}
	},
	judge: func(v verifying, n []int) Check {
		versions, atLast, parked := n[0], n[1], n[2]
		return Check{Name: "per-order order held", Pass: versions == v.orders && atLast == v.orders && parked == 0,
			Want: v.pick(fmt.Sprintf("%d orders at version %d, 0 parked", v.orders, loadgen.PaidVersion),
				fmt.Sprintf("%d orders at their last version (%d or %d), 0 parked", v.orders, loadgen.PaidVersion, loadgen.RefundVersion)),
			Got: v.pick(fmt.Sprintf("%d orders, %d at version %d, %d parked", versions, atLast, loadgen.PaidVersion, parked),
				fmt.Sprintf("%d orders, %d at their last version, %d parked", versions, atLast, parked))}
	},
}}

// counts runs a query of one row of counts and returns them.
func counts(ctx context.Context, db *sql.DB, query string, args ...any) ([]int, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	n, into := make([]int, len(cols)), make([]any, len(cols))
	for i := range n {
		into[i] = &n[i]
	}
	if !rows.Next() {
		return nil, errors.Join(rows.Err(), sql.ErrNoRows)
	}
	if err := rows.Scan(into...); err != nil {
		return nil, err
	}
	return n, rows.Err()
}

// Load is what a run publishes, counted.
type Load struct {
	// Orders is the run's orders, one OrderPaid each; Refunded and
	// RefundRejected are those of them with a refund or a rejected refund
	// besides (Mix only).
	Orders, Refunded, RefundRejected int
	// Events counts the distinct events, Republished those of them
	// published twice.
	Events, Republished int
}

// LoadOf is the load of a run of cfg.
func LoadOf(cfg Config) Load {
	ids := newRunIDs(cfg.withDefaults())
	return Load{
		Orders: len(ids.orders), Refunded: ids.count(loadgen.ShapeRefunded), RefundRejected: ids.count(loadgen.ShapeRefundRejected),
		Events: len(ids.events), Republished: ids.copies(),
	}
}
