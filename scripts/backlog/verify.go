package backlog

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"

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
	var v string
	if err := d.server.QueryRowContext(ctx, `SHOW max_connections`).Scan(&v); err != nil {
		return 0, fmt.Errorf("max_connections: %w", err)
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil {
		return 0, fmt.Errorf("max_connections %q: %w", v, err)
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

func one(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

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
	for _, s := range d.cfg.Services {
		cs, err := d.verifyService(ctx, s)
		if err != nil {
			return checks, fmt.Errorf("verify %s: %w", s, err)
		}
		checks = append(checks, cs...)
	}
	return checks, nil
}

func (d *drill) verifyService(ctx context.Context, service string) ([]Check, error) {
	db, group, ids := d.dbs[service], d.t.Groups[service], d.ids
	handled := ids.handled[service]
	n, events, orders := len(handled), pq.Array(handled), pq.Array(ids.orders)
	var checks []Check
	add := func(name string, pass bool, want, got string) {
		checks = append(checks, Check{Name: service + ": " + name, Pass: pass, Want: want, Got: got})
	}

	// An event parked until its predecessor came keeps the outcome
	// WAITING_FOR_GAP in its dedup row; no parked event may remain (below),
	// so it was applied then.
	var recorded, applied, afterGap int
	if err := db.QueryRowContext(ctx, `
		SELECT count(*), count(*) FILTER (WHERE outcome = 'APPLIED'), count(*) FILTER (WHERE outcome = 'WAITING_FOR_GAP')
		FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`, group, events).Scan(&recorded, &applied, &afterGap); err != nil {
		return nil, err
	}
	want, got := fmt.Sprintf("%d dedup rows, %d APPLIED", n, n), fmt.Sprintf("%d dedup rows, %d APPLIED", recorded, applied)
	if ids.mix {
		want = fmt.Sprintf("%d dedup rows, each APPLIED or applied after WAITING_FOR_GAP", n)
		got = fmt.Sprintf("%d dedup rows, %d APPLIED, %d after WAITING_FOR_GAP, %d other", recorded, applied, afterGap, recorded-applied-afterGap)
	}
	add("every event recorded once and applied", recorded == n && applied+afterGap == n, want, got)

	if ids.mix {
		// A rebalance redelivers what was not committed yet, so a consumer
		// may count more duplicates than were published; every republished
		// event must be among them.
		republished := ids.republished[service]
		var seen, dups int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FILTER (WHERE duplicates > 0 AND event_id = ANY($3)), coalesce(sum(duplicates), 0)
			FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`,
			group, events, pq.Array(republished)).Scan(&seen, &dups); err != nil {
			return nil, err
		}
		add("every republished event recognised as a duplicate", seen == len(republished) && dups >= len(republished),
			fmt.Sprintf("%d of %d, at least %d DUPLICATE", len(republished), len(republished), len(republished)),
			fmt.Sprintf("%d of %d, %d DUPLICATE (%d from redeliveries)", seen, len(republished), dups, dups-seen))
	}

	refundedN, rejected := ids.count(loadgen.ShapeRefunded), ids.count(loadgen.ShapeRefundRejected)
	orderCount := len(ids.orders)
	switch service {
	case Inventory:
		var deducts, deductEvents, restocks, restockEvents, units int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FILTER (WHERE kind = 'DEDUCT'), count(DISTINCT event_id) FILTER (WHERE kind = 'DEDUCT'),
			       count(*) FILTER (WHERE kind = 'RESTOCK'), count(DISTINCT event_id) FILTER (WHERE kind = 'RESTOCK'),
			       coalesce(sum(-delta), 0)
			FROM stock_movements WHERE event_id = ANY($1)`, events).Scan(&deducts, &deductEvents, &restocks, &restockEvents, &units); err != nil {
			return nil, err
		}
		off, err := ordersOff(ctx, db, movementsPerOrder, ids.orders, ids.perOrder(func(s loadgen.Shape) int64 { return 1 + one(refunded(s)) }))
		if err != nil {
			return nil, err
		}
		name, want := "one deduction per event", fmt.Sprintf("%d movements of %d events, 0 orders off", orderCount, orderCount)
		got := fmt.Sprintf("%d movements of %d events, %d orders off", deducts+restocks, deductEvents+restockEvents, off)
		if ids.mix {
			name = "one deduction per payment, one restock per refund"
			want = fmt.Sprintf("%d DEDUCT of %d events, %d RESTOCK of %d events, 0 orders off", orderCount, orderCount, refundedN, refundedN)
			got = fmt.Sprintf("%d DEDUCT of %d events, %d RESTOCK of %d events, %d orders off", deducts, deductEvents, restocks, restockEvents, off)
		}
		add(name, deducts == orderCount && deductEvents == orderCount && restocks == refundedN && restockEvents == refundedN && off == 0,
			want, got)
		kept := 0
		for _, u := range ids.units {
			kept += u
		}
		deducted, skusOff, err := d.stock(ctx, db)
		if err != nil {
			return nil, err
		}
		name = "stock deducted = sum of quantities"
		if ids.mix {
			name += " kept"
		}
		add(name, units == kept && deducted == kept && skusOff == 0,
			fmt.Sprintf("%d units deducted, every SKU as its orders", kept),
			fmt.Sprintf("%d units moved, %d deducted, %d SKUs off", units, deducted, skusOff))
	case Points:
		var earn, earnOrders, reversals, reversalOrders int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FILTER (WHERE entry_type = 'EARN'), count(DISTINCT order_id) FILTER (WHERE entry_type = 'EARN'),
			       count(*) FILTER (WHERE entry_type = 'REVERSAL'), count(DISTINCT order_id) FILTER (WHERE entry_type = 'REVERSAL')
			FROM points_ledger WHERE event_id = ANY($1)`, events).Scan(&earn, &earnOrders, &reversals, &reversalOrders); err != nil {
			return nil, err
		}
		off, err := ordersOff(ctx, db, ledgerPerOrder, ids.orders, ids.perOrder(func(s loadgen.Shape) int64 { return 1 + one(refunded(s)) }))
		if err != nil {
			return nil, err
		}
		name, want := "one ledger row per order", fmt.Sprintf("%d EARN rows for %d orders", orderCount, orderCount)
		if ids.mix {
			name, want = "ledger rows = earn + reversal", fmt.Sprintf("%d EARN, %d REVERSAL, 0 orders off", orderCount, refundedN)
		}
		add(name, earn == orderCount && earnOrders == orderCount && reversals == refundedN && reversalOrders == refundedN && off == 0,
			want, fmt.Sprintf("%d EARN for %d orders, %d REVERSAL for %d orders, %d orders off", earn, earnOrders, reversals, reversalOrders, off))
	case Notification:
		var paidN, refundedK, rejectedK int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FILTER (WHERE kind = 'ORDER_PAID'), count(*) FILTER (WHERE kind = 'ORDER_REFUNDED'),
			       count(*) FILTER (WHERE kind = 'REFUND_REJECTED')
			FROM notifications WHERE event_id = ANY($1)`, events).Scan(&paidN, &refundedK, &rejectedK); err != nil {
			return nil, err
		}
		off, err := ordersOff(ctx, db, notificationsPerOrder, ids.orders, ids.perOrder(func(s loadgen.Shape) int64 { return 1 + one(answered(s)) }))
		if err != nil {
			return nil, err
		}
		name, want := "one notification per order", fmt.Sprintf("%d ORDER_PAID for %d orders", orderCount, orderCount)
		if ids.mix {
			name, want = "notifications per kind", fmt.Sprintf("%d ORDER_PAID, %d ORDER_REFUNDED, %d REFUND_REJECTED, 0 orders off",
				orderCount, refundedN, rejected)
		}
		add(name, paidN == orderCount && refundedK == refundedN && rejectedK == rejected && off == 0,
			want, fmt.Sprintf("%d ORDER_PAID, %d ORDER_REFUNDED, %d REFUND_REJECTED, %d orders off", paidN, refundedK, rejectedK, off))
	}

	var dead int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dead_letters WHERE consumer = $1 AND event_id = ANY($2)`,
		group, pq.Array(ids.events)).Scan(&dead); err != nil {
		return nil, err
	}
	add("nothing dead-lettered", dead == 0, "0 dead letters", fmt.Sprintf("%d dead letters", dead))

	last := func(s loadgen.Shape) int64 {
		if refunded(s) || (service == Notification && answered(s)) {
			return loadgen.RefundVersion
		}
		return loadgen.PaidVersion
	}
	var versions, atLast, parked int
	if err := db.QueryRowContext(ctx, `
		SELECT count(av.aggregate_id), count(*) FILTER (WHERE av.version = w.version)
		FROM unnest($2::text[], $3::bigint[]) AS w(aggregate_id, version)
		JOIN aggregate_versions av ON av.consumer = $1 AND av.aggregate_id = w.aggregate_id`,
		group, orders, pq.Array(ids.perOrder(last))).Scan(&versions, &atLast); err != nil {
		return nil, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM parked_events WHERE consumer = $1 AND aggregate_id = ANY($2)`,
		group, orders).Scan(&parked); err != nil {
		return nil, err
	}
	want, got = fmt.Sprintf("%d orders at version %d, 0 parked", orderCount, loadgen.PaidVersion),
		fmt.Sprintf("%d orders, %d at version %d, %d parked", versions, atLast, loadgen.PaidVersion, parked)
	if ids.mix {
		want = fmt.Sprintf("%d orders at their last version (%d or %d), 0 parked", orderCount, loadgen.PaidVersion, loadgen.RefundVersion)
		got = fmt.Sprintf("%d orders, %d at their last version, %d parked", versions, atLast, parked)
	}
	add("per-order order held", versions == orderCount && atLast == orderCount && parked == 0, want, got)
	return checks, nil
}

// The per-order counts ordersOff compares, one query per effect table.
const (
	movementsPerOrder     = `SELECT order_id, count(*) FROM stock_movements WHERE order_id = ANY($1) GROUP BY order_id`
	ledgerPerOrder        = `SELECT order_id, count(*) FROM points_ledger WHERE order_id = ANY($1) GROUP BY order_id`
	notificationsPerOrder = `SELECT order_id, count(*) FROM notifications WHERE order_id = ANY($1) GROUP BY order_id`
)

// ordersOff counts the orders whose rows, counted by perOrder, are not
// want: an order with an effect too many (even under another event id) or
// one too few.
func ordersOff(ctx context.Context, db *sql.DB, perOrder string, orders []string, want []int64) (int, error) {
	var off int
	err := db.QueryRowContext(ctx, `
		SELECT count(*) FROM unnest($1::text[], $2::bigint[]) AS w(order_id, n)
		LEFT JOIN (`+perOrder+`) AS g(order_id, n) USING (order_id)
		WHERE coalesce(g.n, 0) <> w.n`, pq.Array(orders), pq.Array(want)).Scan(&off)
	return off, err
}

// stock sums the deducted units of the run's SKUs and counts the SKUs whose
// deduction differs from what their orders bought.
func (d *drill) stock(ctx context.Context, db *sql.DB) (deducted, off int, err error) {
	rows, err := db.QueryContext(ctx, `SELECT sku, deducted FROM stock WHERE sku = ANY($1)`, pq.Array(d.ids.skus))
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var sku string
		var n int
		if err := rows.Scan(&sku, &n); err != nil {
			return 0, 0, err
		}
		seen[sku] = true
		deducted += n
		if n != d.ids.units[sku] {
			off++
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, err
	}
	off += len(d.ids.skus) - len(seen)
	return deducted, off, nil
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
