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

// runIDs are the ids of the run's events, orders and SKUs, and how many
// units of each SKU the run's orders buy.
type runIDs struct {
	events, orders, skus []string
	units                map[string]int
}

func newRunIDs(cfg Config) runIDs {
	r := runIDs{units: map[string]int{}}
	for i := 1; i <= cfg.Count; i++ {
		r.events = append(r.events, loadgen.EventID(cfg.RunID, i))
		r.orders = append(r.orders, loadgen.OrderID(cfg.RunID, i))
		r.units[loadgen.SKUFor(cfg.RunID, i, cfg.SKUs)] += loadgen.ItemQuantity
	}
	for k := 1; k <= min(cfg.SKUs, cfg.Count); k++ {
		r.skus = append(r.skus, loadgen.SKU(cfg.RunID, k))
	}
	return r
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
// equals Count.
func (d *drill) accounted(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, s := range d.cfg.Services {
		var n int
		err := d.dbs[s].QueryRowContext(ctx, `
			SELECT count(*) FROM (
				SELECT event_id FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)
				UNION
				SELECT event_id FROM dead_letters WHERE consumer = $1 AND event_id = ANY($2)) x`,
			d.t.Groups[s], pq.Array(d.ids.events)).Scan(&n)
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
	db, group, n := d.dbs[service], d.t.Groups[service], d.cfg.Count
	events, orders := pq.Array(d.ids.events), pq.Array(d.ids.orders)
	var checks []Check
	add := func(name string, pass bool, want, got string) {
		checks = append(checks, Check{Name: service + ": " + name, Pass: pass, Want: want, Got: got})
	}

	var recorded, applied int
	if err := db.QueryRowContext(ctx, `
		SELECT count(*), count(*) FILTER (WHERE outcome = 'APPLIED')
		FROM processed_events WHERE consumer = $1 AND event_id = ANY($2)`, group, events).Scan(&recorded, &applied); err != nil {
		return nil, err
	}
	add("every event recorded once and applied", recorded == n && applied == n,
		fmt.Sprintf("%d dedup rows, %d APPLIED", n, n), fmt.Sprintf("%d dedup rows, %d APPLIED", recorded, applied))

	switch service {
	case Inventory:
		var moves, distinct, units int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*), count(DISTINCT event_id), coalesce(sum(-delta), 0)
			FROM stock_movements WHERE event_id = ANY($1) AND kind = 'DEDUCT'`, events).Scan(&moves, &distinct, &units); err != nil {
			return nil, err
		}
		want := 0
		for _, u := range d.ids.units {
			want += u
		}
		add("one deduction per event", moves == n && distinct == n,
			fmt.Sprintf("%d movements of %d events", n, n), fmt.Sprintf("%d movements of %d events", moves, distinct))
		deducted, off, err := d.stock(ctx, db)
		if err != nil {
			return nil, err
		}
		add("stock deducted = sum of quantities", units == want && deducted == want && off == 0,
			fmt.Sprintf("%d units deducted, every SKU as its orders", want),
			fmt.Sprintf("%d units moved, %d deducted, %d SKUs off", units, deducted, off))
	case Points:
		var rows, perOrder, wrong int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*), count(DISTINCT order_id) FROM points_ledger WHERE event_id = ANY($1) AND entry_type = 'EARN'`,
			events).Scan(&rows, &perOrder); err != nil {
			return nil, err
		}
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FROM (SELECT order_id FROM points_ledger WHERE order_id = ANY($1) GROUP BY order_id HAVING count(*) <> 1) x`,
			orders).Scan(&wrong); err != nil {
			return nil, err
		}
		add("one ledger row per order", rows == n && perOrder == n && wrong == 0,
			fmt.Sprintf("%d EARN rows for %d orders", n, n), fmt.Sprintf("%d EARN rows for %d orders, %d orders without exactly one row", rows, perOrder, wrong))
	case Notification:
		var rows, perOrder, wrong int
		if err := db.QueryRowContext(ctx, `
			SELECT count(*), count(DISTINCT order_id) FROM notifications WHERE event_id = ANY($1) AND kind = 'ORDER_PAID'`,
			events).Scan(&rows, &perOrder); err != nil {
			return nil, err
		}
		if err := db.QueryRowContext(ctx, `
			SELECT count(*) FROM (SELECT order_id FROM notifications WHERE order_id = ANY($1) GROUP BY order_id HAVING count(*) <> 1) x`,
			orders).Scan(&wrong); err != nil {
			return nil, err
		}
		add("one notification per order", rows == n && perOrder == n && wrong == 0,
			fmt.Sprintf("%d ORDER_PAID for %d orders", n, n), fmt.Sprintf("%d ORDER_PAID for %d orders, %d orders without exactly one", rows, perOrder, wrong))
	}

	var dead int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dead_letters WHERE consumer = $1 AND event_id = ANY($2)`,
		group, events).Scan(&dead); err != nil {
		return nil, err
	}
	add("nothing dead-lettered", dead == 0, "0 dead letters", fmt.Sprintf("%d dead letters", dead))

	var versions, atPaid, parked int
	if err := db.QueryRowContext(ctx, `
		SELECT count(*), count(*) FILTER (WHERE version = $3)
		FROM aggregate_versions WHERE consumer = $1 AND aggregate_id = ANY($2)`,
		group, orders, loadgen.PaidVersion).Scan(&versions, &atPaid); err != nil {
		return nil, err
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM parked_events WHERE consumer = $1 AND aggregate_id = ANY($2)`,
		group, orders).Scan(&parked); err != nil {
		return nil, err
	}
	add("per-order order held", versions == n && atPaid == n && parked == 0,
		fmt.Sprintf("%d orders at version %d, 0 parked", n, loadgen.PaidVersion),
		fmt.Sprintf("%d orders, %d at version %d, %d parked", versions, atPaid, loadgen.PaidVersion, parked))
	return checks, nil
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
