package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// MonitorConfig tunes the convergence monitor.
type MonitorConfig struct {
	// Interval is how often it looks.
	Interval time.Duration
	// MaxOrders bounds the changed orders one look reads, so a first look
	// at a long history spreads over several.
	MaxOrders int
	// MaxChecks bounds the unconverged orders one look compares (reading
	// every service's view of each): however large a backlog of
	// unconverged orders grows, a look costs the same, and the orders are
	// checked in turn.
	MaxChecks int
}

// Watch keeps the monitor's state.
type Watch interface {
	Cursor(ctx context.Context) (Cursor, error)
	SaveCursor(ctx context.Context, c Cursor) error
	Watch(ctx context.Context, orders []rec.Order) error
	Unconverged(ctx context.Context, limit int) ([]string, error)
	Converged(ctx context.Context, id string, version int64, at time.Time) (time.Time, bool, error)
	Past(ctx context.Context, cutoff time.Time) (int, *time.Time, error)
}

// Monitor follows every order's changes until every service has caught
// up: it measures each convergence (order_convergence_seconds, from the
// order's change to the last service's effect) and counts the orders past
// the deadline (orders_unconverged, and the age of the oldest). It reads
// what runs read and takes no action: acting is a run's.
type Monitor struct {
	cfg      MonitorConfig
	deadline time.Duration
	pageSize int
	peers    Peers
	watch    Watch
	metrics  *Metrics
	logger   *slog.Logger
	now      func() time.Time
}

// NewMonitor returns a monitor that shares the reconciler's peers and
// deadline.
func NewMonitor(cfg MonitorConfig, r *Reconciler, watch Watch) *Monitor {
	return &Monitor{cfg: cfg, deadline: r.cfg.Deadline, pageSize: r.cfg.PageSize, peers: r.peers, watch: watch,
		metrics: r.metrics, logger: r.logger, now: r.now}
}

// Run looks every interval until ctx ends. A look that fails (a service
// down) is logged and tried again at the next: the gauges keep their last
// values, and the oldest age grows with the outage once it is measured.
func (m *Monitor) Run(ctx context.Context) error {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.Look(ctx); err != nil && ctx.Err() == nil {
			m.logger.WarnContext(ctx, "convergence check failed; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Look reads the orders that changed since the last look, checks the ones
// not yet converged, and updates the gauges. The gauges are measured even
// when a service cannot be read: an outage is exactly when orders stop
// converging, and the watched orders alone say how many are past the
// deadline.
func (m *Monitor) Look(ctx context.Context) error {
	followed, err := m.follow(ctx)
	if err == nil {
		err = m.check(ctx, followed)
	}
	return errors.Join(err, m.measure(ctx))
}

// commitMargin keeps the cursor this far behind now. An order's updated_at
// is its transaction's start, so a transaction that commits after a page
// was read may carry a time behind the page: reading only changes older
// than the margin, longer than an order's transaction takes, misses none.
const commitMargin = time.Second

// follow records the orders' new versions and returns the views it read,
// which check uses rather than read them again.
func (m *Monitor) follow(ctx context.Context) (map[string]rec.Order, error) {
	cursor, err := m.watch.Cursor(ctx)
	if err != nil {
		return nil, err
	}
	followed := map[string]rec.Order{}
	before := m.now().Add(-commitMargin)
	for len(followed) < m.cfg.MaxOrders {
		orders, next, err := m.peers.ChangedOrders(ctx, cursor, before, m.pageSize)
		if err != nil {
			return nil, err
		}
		if err := m.watch.Watch(ctx, orders); err != nil {
			return nil, err
		}
		for _, o := range orders {
			followed[o.ID] = o
		}
		if len(orders) > 0 {
			last := orders[len(orders)-1]
			cursor = Cursor{ChangedAfter: last.UpdatedAt, AfterID: last.ID}
			if err := m.watch.SaveCursor(ctx, cursor); err != nil {
				return nil, err
			}
		}
		if next == nil {
			break
		}
	}
	return followed, nil
}

// check compares the orders not yet converged, oldest change first; the
// views of followed orders are fresh, the others are read again.
func (m *Monitor) check(ctx context.Context, followed map[string]rec.Order) error {
	ids, err := m.watch.Unconverged(ctx, m.cfg.MaxChecks)
	if err != nil {
		return err
	}
	stuckBefore := m.now().Add(-m.deadline)
	for start := 0; start < len(ids); start += m.pageSize {
		orders, err := m.views(ctx, ids[start:min(start+m.pageSize, len(ids))], followed)
		if err != nil {
			return err
		}
		var known []rec.Order
		for _, o := range orders {
			if o.Found {
				known = append(known, o)
			}
		}
		if len(known) == 0 {
			continue
		}
		// The order may have moved on since it was followed: its view now
		// carries the version and change time to converge to.
		if err := m.watch.Watch(ctx, known); err != nil {
			return err
		}
		facts, err := m.peers.Facts(ctx, known)
		if err != nil {
			return err
		}
		for _, f := range facts {
			if !rec.Converged(rec.Compare(f, stuckBefore)) {
				continue
			}
			at := f.LastEffectAt()
			changedAt, first, err := m.watch.Converged(ctx, f.Order.ID, f.Order.Version, at)
			if err != nil {
				return err
			}
			if first && needsEffects(f.Order) && m.metrics != nil {
				m.metrics.convergence.Observe(max(at.Sub(changedAt), 0).Seconds())
			}
		}
	}
	return nil
}

// views returns the order views of ids: those followed as they were read,
// the others from the order service.
func (m *Monitor) views(ctx context.Context, ids []string, followed map[string]rec.Order) ([]rec.Order, error) {
	var missing []string
	for _, id := range ids {
		if _, ok := followed[id]; !ok {
			missing = append(missing, id)
		}
	}
	var read []rec.Order
	if len(missing) > 0 {
		var err error
		if read, err = m.peers.Orders(ctx, missing); err != nil {
			return nil, err
		}
	}
	out := make([]rec.Order, 0, len(ids))
	for _, id := range ids {
		if o, ok := followed[id]; ok {
			out = append(out, o)
		}
	}
	return append(out, read...), nil
}

// needsEffects reports whether the order's last change asked something of
// another service: only then is there a convergence to measure.
func needsEffects(o rec.Order) bool {
	if o.Paid() {
		return true
	}
	for _, r := range o.Refunds {
		if r.Kind == rec.KindPaymentReturn {
			return true
		}
	}
	return false
}

// measure sets the gauges from the watched orders past the deadline.
func (m *Monitor) measure(ctx context.Context) error {
	now := m.now()
	n, oldest, err := m.watch.Past(ctx, now.Add(-m.deadline))
	if err != nil {
		return err
	}
	if m.metrics == nil {
		return nil
	}
	m.metrics.unconverged.Set(float64(n))
	age := 0.0
	if oldest != nil {
		age = now.Sub(*oldest).Seconds()
	}
	m.metrics.oldest.Set(age)
	return nil
}
