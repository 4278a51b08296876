package drill

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// session is one case's connection to the suite: the suite's API client,
// the ids the case creates, the cleanups it registered and the convergence
// time it measured.
//
// Its methods are the cases' steps, and a step that fails ends the case,
// as an assertion of tests/harness ends a test: it panics with a failure,
// which run recovers into the case's error. A case then reads as the
// steps of its docs/exercises/ page, each once.
type session struct {
	ctx  context.Context
	t    Target
	slug string // the case's part of every id
	api  *suiteapi.Client

	converged time.Duration
	// plants are the synthetic orders the case planted, removed
	// once its verdict is taken.
	plants   plantings
	cleanups []*cleanup
}

func newSession(ctx context.Context, t Target, slug string) *session {
	return &session{ctx: ctx, t: t, slug: slug, api: suiteapi.New(suiteapi.Config{
		URLs: t.URLs, AdminToken: t.AdminToken, HTTPClient: t.HTTPClient, Brokers: t.Brokers, Topic: t.Topic, DLQTopic: t.DLQTopic,
	})}
}

func (s *session) close() { s.api.Close() }

// failure is the panic of a step that ends its case: run recovers it.
type failure struct{ err error }

// check ends the case with err, unless it is nil.
func check(err error) {
	if err != nil {
		panic(failure{err})
	}
}

// checkf ends the case with err, said in a context, unless it is nil.
func checkf(err error, format string, args ...any) {
	if err != nil {
		panic(failure{fmt.Errorf(format+": %w", append(args, err)...)})
	}
}

// must returns v, or ends the case with err.
func must[T any](v T, err error) T {
	check(err)
	return v
}

// must2 is must of a call with two results.
func must2[A, B any](a A, b B, err error) (A, B) {
	check(err)
	return a, b
}

// errOf is the error of a call whose answer the case does not need: a
// controller's view of the service or broker it changed.
func errOf[T any](_ T, err error) error { return err }

// fail ends the case with a formatted error.
func fail(format string, args ...any) { panic(failure{fmt.Errorf(format, args...)}) }

// cleanup is something a case undoes however it ends: a fail point
// disarmed, a service restarted, the broker started again.
type cleanup struct {
	what string
	undo func(ctx context.Context) error
	done bool
}

// cleanup registers undo, which run calls once the case has ended, however
// it ended, the last registered first. The returned function undoes it at
// once instead, ending the case if that fails.
func (s *session) cleanup(what string, undo func(ctx context.Context) error) (now func()) {
	c := &cleanup{what: what, undo: undo}
	s.cleanups = append(s.cleanups, c)
	return func() {
		if !c.done {
			c.done = true
			checkf(c.undo(s.ctx), "%s", c.what)
		}
	}
}

// run runs a case's body and then its cleanups: it returns what the body
// saw, or the failure that ended it joined with every cleanup that failed.
func (s *session) run(b body) (seen string, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			seen, err = "", f.err
		}
		// A case interrupted with Ctrl-C still undoes what it did.
		ctx := context.WithoutCancel(s.ctx)
		for _, c := range slices.Backward(s.cleanups) {
			if !c.done {
				c.done = true
				if cerr := c.undo(ctx); cerr != nil {
					err = errors.Join(err, fmt.Errorf("%s: %w", c.what, cerr))
				}
			}
		}
	}()
	return b(s), nil
}

// orderID is an order id unique to this run and case; suffix tells the
// case's orders apart.
func (s *session) orderID(suffix string) string {
	return "O-" + s.t.RunID + "-" + s.slug + suffix
}

// sku is a SKU unique to this run and case, so stock counts are the case's own.
func (s *session) sku(suffix string) string {
	return "SKU-" + s.t.RunID + "-" + s.slug + suffix
}

// StatusError is an HTTP answer other than the one a drill needs.
type StatusError = suiteapi.StatusError

// waitFired waits until a service's fail point has fired at least
// atLeast times since it was armed: a drill whose fault never happened proves
// nothing. A point that ends its process ("exit") cannot be read after;
// its exit status (137) is the proof instead.
func (s *session) waitFired(service, name string, atLeast int) {
	s.waitUntil(fmt.Sprintf("%s fail point %s to fire %d times", service, name, atLeast), func() (string, bool, error) {
		hits, err := s.api.FailPointHits(s.ctx, service, name)
		return fmt.Sprintf("fired %d times", hits), hits >= atLeast, err
	})
}

// arm arms a service's fail point at run time (times 0: every time) until
// the case ends, or until the returned function disarms it.
func (s *session) arm(service, name, action string, times int) (disarm func()) {
	check(s.api.ArmFailPoint(s.ctx, service, name, action, times))
	return s.cleanup("disarm "+name, func(ctx context.Context) error {
		return s.api.ArmFailPoint(ctx, service, name, "off", 0)
	})
}

// restart restarts service with env added to its usual environment; the
// case restarts it with its usual one when it ends, or when the returned
// function is called.
func (s *session) restart(service string, env map[string]string) (restore func()) {
	restore = s.cleanup("restore the "+service+" service", s.startUsual(service))
	checkf(errOf(s.t.Controller.Restart(s.ctx, service, env)), "restart %s with %v", service, env)
	return restore
}

// startUsual is a cleanup's undo that (re)starts service with its usual
// environment.
func (s *session) startUsual(service string) func(ctx context.Context) error {
	return func(ctx context.Context) error { return errOf(s.t.Controller.Restart(ctx, service, nil)) }
}

// waitUntil polls cond until it holds and returns how long that took.
// After the target's timeout it ends the case with what, cond's last
// error and what cond last saw.
func (s *session) waitUntil(what string, cond func() (seen string, ok bool, err error)) time.Duration {
	return s.waitFor(s.t.Timeout, what, cond)
}

// waitFor is waitUntil with its own timeout.
func (s *session) waitFor(timeout time.Duration, what string, cond func() (seen string, ok bool, err error)) time.Duration {
	var seen string
	took, err := s.api.WaitFor(s.ctx, timeout, what, func() (ok bool, err error) {
		seen, ok, err = cond()
		return ok, err
	})
	if err != nil && seen != "" {
		fail("%w; seen %s", err, seen)
	}
	check(err)
	return took
}

// The suite's answers the drills read.
type (
	stock         = suiteapi.Stock
	orderView     = suiteapi.OrderView
	commandResult = suiteapi.CommandResult
	orderEvent    = suiteapi.OrderEvent
	deadLetter    = suiteapi.DeadLetter
	outboxRow     = outbox.Status
)

// order reads GET /orders/{id}.
func (s *session) order(orderID string) orderView { return must(s.api.Order(s.ctx, orderID)) }

// stock reads a SKU's stock.
func (s *session) stock(sku string) stock { return must(s.api.Stock(s.ctx, sku)) }

// orderIs checks the order is status at version, when (a phrase such as
// "after the crash").
func (s *session) orderIs(orderID, status string, version int64, when string) orderView {
	o := s.order(orderID)
	if o.Status != status || o.Version != version {
		fail("%s %s is %s v%d, want %s v%d", when, orderID, o.Status, o.Version, status, version)
	}
	return o
}

// stockIs checks a SKU's stock is available and deducted, when (a phrase
// such as "after the republish").
func (s *session) stockIs(sku string, available, deducted int, when string) stock {
	st := s.stock(sku)
	if st.Available != available || st.Deducted != deducted {
		fail("%s the stock of %s is %d/%d, want %d/%d", when, sku, st.Available, st.Deducted, available, deducted)
	}
	return st
}

// seeded is a SKU of the case (suffix tells its SKUs apart) with stock
// units available.
func (s *session) seeded(suffix string, stock int) string {
	sku := s.sku(suffix)
	check(s.api.SetStock(s.ctx, sku, stock))
	return sku
}

// effects is every side effect of one order the drills count.
type effects struct {
	Inventory     string // the inventory consumer's state for the order
	Ledger        []suiteapi.PointsEntry
	Notifications []suiteapi.Notice
}

func (e effects) String() string {
	return fmt.Sprintf("inventory %s, ledger %d, notifications %d", e.Inventory, len(e.Ledger), len(e.Notifications))
}

// are says the effects are the inventory state and the ledger and
// notification counts given.
func (e effects) are(inventory string, ledger, notifications int) bool {
	return e.Inventory == inventory && len(e.Ledger) == ledger && len(e.Notifications) == notifications
}

// readEffects reads what the consumers did for an order.
func (s *session) readEffects(orderID string) (effects, error) {
	inv, ierr := s.api.InventoryState(s.ctx, orderID)
	ledger, lerr := s.api.PointsLedger(s.ctx, orderID)
	notes, nerr := s.api.Notifications(s.ctx, orderID)
	return effects{Inventory: inv, Ledger: ledger, Notifications: notes}, errors.Join(ierr, lerr, nerr)
}

// effects reads what the consumers did for an order.
func (s *session) effects(orderID string) effects { return must(s.readEffects(orderID)) }

// noEffects checks no consumer has done anything for the order yet.
func (s *session) noEffects(orderID, when string) {
	if eff := s.effects(orderID); !eff.are("NONE", 0, 0) {
		fail("%s: %s, want NONE, 0, 0", when, eff)
	}
}

// waitEffects waits until the order's effects are want (inventory state,
// ledger entries, notifications) and returns how long that took.
func (s *session) waitEffects(orderID, inventory string, ledger, notifications int) time.Duration {
	return s.waitEffectsFor(s.t.Timeout, fmt.Sprintf("%s: inventory %s, ledger %d, notifications %d", orderID, inventory, ledger, notifications),
		orderID, inventory, ledger, notifications)
}

// waitEffectsFor is waitEffects with its own timeout and description.
func (s *session) waitEffectsFor(timeout time.Duration, what, orderID, inventory string, ledger, notifications int) time.Duration {
	return s.waitFor(timeout, what, func() (string, bool, error) {
		eff, err := s.readEffects(orderID)
		return eff.String(), eff.are(inventory, ledger, notifications), err
	})
}

// processedOnce checks every consumer holds exactly one dedup row for eventID.
func (s *session) processedOnce(eventID string) {
	for _, c := range consumers {
		if n := must(s.api.ProcessedEventCount(s.ctx, c, eventID)); n != 1 {
			fail("%s holds %d dedup rows for %s, want 1", c, n, eventID)
		}
	}
}

// waitDeadLetter waits until service has dead-lettered one message of
// aggregateID and returns it. A retryable failure takes the retry schedule
// to get there, so the wait allows three times its bound on top of the
// timeout: a slow schedule is then reported for what it is, not as a
// timeout.
func (s *session) waitDeadLetter(service, aggregateID string) deadLetter {
	return s.waitDeadLetterFor(s.t.Timeout+3*s.t.RetryBound(), service+" dead-letters "+aggregateID, service, aggregateID)
}

// waitDeadLetterFor is waitDeadLetter with its own timeout and description.
func (s *session) waitDeadLetterFor(timeout time.Duration, what, service, aggregateID string) deadLetter {
	var dl []deadLetter
	s.waitFor(timeout, what, func() (_ string, _ bool, err error) {
		dl, err = s.api.DeadLetters(s.ctx, service, aggregateID, "")
		return "", len(dl) > 0, err
	})
	if len(dl) != 1 {
		fail("%s holds %d dead letters for %s, want 1", service, len(dl), aggregateID)
	}
	return dl[0]
}

// counter is a Prometheus counter of the services, with the labels a case
// reads it by: the cases measure what the services did by its growth.
type counter struct {
	name   string
	labels map[string]string
}

var (
	// handled is how many messages a consumer has handled without error
	// (consumer_messages_total{outcome="ok"}): a duplicate, a stale event
	// and an event the consumer has no rule for all count, so it shows a
	// copy was read even when it changed nothing.
	handled     = counter{"consumer_messages_total", map[string]string{"outcome": "ok"}}
	retries     = counter{"consumer_retries_total", nil}
	gapTimeouts = counter{"consumer_gap_timeouts_total", nil}
)

// outcomes counts one inbox outcome (APPLIED, DUPLICATE, ...) of a consumer.
func outcomes(outcome string) counter {
	return counter{"consumer_event_outcomes_total", map[string]string{"outcome": outcome}}
}

// readCounts reads c on each of services.
func (s *session) readCounts(c counter, services ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, svc := range services {
		n, err := s.api.Metric(s.ctx, svc, c.name, c.labels)
		if err != nil {
			return nil, err
		}
		out[svc] = n
	}
	return out, nil
}

// counts reads c on each of services.
func (s *session) counts(c counter, services ...string) map[string]float64 {
	return must(s.readCounts(c, services...))
}

// grown reads c again on the services of before and returns by how much
// it grew on each.
func (s *session) grown(c counter, before map[string]float64) map[string]float64 {
	now := s.counts(c, slices.Collect(maps.Keys(before))...)
	for svc := range now {
		now[svc] -= before[svc]
	}
	return now
}

// noRetries checks no service of before has retried since.
func (s *session) noRetries(before map[string]float64) {
	for svc, d := range s.grown(retries, before) {
		if d != 0 {
			fail("%s retried %v times, want none", svc, d)
		}
	}
}

// waitGrown waits until c has grown by at least n on every service of
// before, and returns how long that took.
func (s *session) waitGrown(c counter, before map[string]float64, n int, what string) time.Duration {
	return s.waitUntil(what, func() (string, bool, error) {
		now, err := s.readCounts(c, slices.Collect(maps.Keys(before))...)
		for svc, v := range now {
			if v < before[svc]+float64(n) {
				return fmt.Sprint(now), false, err
			}
		}
		return "", err == nil, err
	})
}

// sameKeyPartition returns an order id, made from base, whose key lands on
// partition p of n — where the default (murmur2) partitioner of every
// client in the suite puts it.
func (s *session) sameKeyPartition(base string, p int32, n int) string {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(s.t.Topic)
	for i := range 10 * n {
		id := base + strconv.Itoa(i)
		if int32(part.Partition(&kgo.Record{Key: []byte(id)}, n)) == p {
			return id
		}
	}
	fail("no order id from %s lands on partition %d of %d", base, p, n)
	return ""
}

// orderEvents builds the events of one synthetic order, as the order
// service would emit them, for cases that publish straight to the broker
// (session.newOrderEvents), recording each as planted.
type orderEvents struct {
	orderID  string
	sku      string
	quantity int
	amount   event.Money
	plants   *plantings
}

func (o orderEvents) build(t event.Type, version int64, data any) event.Envelope {
	env := must(event.New(t, event.Meta{AggregateID: o.orderID, AggregateVersion: version, Producer: "drill"}, data))
	o.plants.add(o.orderID, env.EventID)
	return env
}

func (o orderEvents) created() event.Envelope {
	return o.build(event.OrderCreated, 1, event.OrderCreatedData{CustomerID: "C-drill", Currency: "CNY", Amount: o.amount,
		Items: []event.PricedItem{{SKU: o.sku, Quantity: o.quantity, UnitPrice: o.amount}}})
}

func (o orderEvents) paid() event.Envelope {
	return o.build(event.OrderPaid, 3, event.OrderPaidData{PaymentID: "P-" + o.orderID, PaidAmount: o.amount, Currency: "CNY",
		CustomerID: "C-drill", Items: []event.Item{{SKU: o.sku, Quantity: o.quantity}}})
}

func (o orderEvents) refunded() event.Envelope {
	items := []event.Item{{SKU: o.sku, Quantity: o.quantity}}
	return o.build(event.OrderRefunded, 5, event.OrderRefundedData{RefundID: "R-" + o.orderID, PaymentID: "P-" + o.orderID,
		RefundedAmount: o.amount, TotalRefundedAmount: o.amount, Currency: "CNY", CustomerID: "C-drill",
		Items: items, TotalReturnedItems: items})
}

// record is env as the relay would publish it.
func (s *session) record(env event.Envelope) *kgo.Record {
	return must(suiteapi.Record(s.t.Topic, env))
}

// produce publishes records and returns the partition of the first.
func (s *session) produce(recs ...*kgo.Record) int32 {
	return must(s.api.Produce(s.ctx, recs...))[0].Partition
}

// drillOrder is an order a case placed through the order service, for a
// SKU of its own.
type drillOrder struct {
	id, sku, amount string
	quantity, stock int
}

// placed seeds a SKU of the case with stock units and places (creates and
// checks out) an order of quantity × unitPrice of it.
func (s *session) placed(suffix string, quantity int, unitPrice string, stock int) drillOrder {
	o := drillOrder{id: s.orderID(suffix), sku: s.seeded(suffix, stock), quantity: quantity, stock: stock}
	o.amount = s.placeOrder(o.id, o.sku, quantity, unitPrice)
	return o
}

// placedRelayed is placed, once OrderCreated and OrderCheckedOut have left
// the order service: a fault armed afterwards meets the payment's event
// and nothing earlier.
func (s *session) placedRelayed(quantity int) drillOrder {
	o := s.placed("", quantity, "40.00", seedStock)
	s.waitRelayed(o.id, 2)
	return o
}

// paidOrder places and pays an order of quantity × unitPrice for a SKU of
// its own, with stock in stock, and waits until every consumer has applied
// the payment.
func (s *session) paidOrder(suffix string, quantity int, unitPrice string, stock int) drillOrder {
	o := s.placed(suffix, quantity, unitPrice, stock)
	s.pay(o)
	s.waitEffects(o.id, "DEDUCTED", 1, 1)
	return o
}

// placeOrder creates and checks out an order of quantity × sku at unitPrice
// for the drills' customer and returns its amount.
func (s *session) placeOrder(orderID, sku string, quantity int, unitPrice string) string {
	return must(s.api.PlaceOrder(s.ctx, suiteapi.NewOrder{OrderID: orderID, CustomerID: "C-drill", Currency: "CNY",
		Items: []suiteapi.Item{{SKU: sku, Quantity: quantity, UnitPrice: unitPrice}}}))
}

// pay pays an order through the payment service.
func (s *session) pay(o drillOrder) {
	res := must(s.api.Pay(s.ctx, suiteapi.PaymentRequest{OrderID: o.id, Amount: o.amount, Currency: "CNY"}))
	if res.BusinessCode != suiteapi.Success {
		fail("pay %s: businessCode %s", o.id, res.BusinessCode)
	}
}

// ledgerPoints adds up an order's points ledger.
func ledgerPoints(ledger []suiteapi.PointsEntry) int64 {
	var points int64
	for _, e := range ledger {
		points += e.Points
	}
	return points
}

// orderEvent returns the order's only outbox row of type t.
func (s *session) orderEvent(orderID, t string) outboxRow {
	row, ok := must2(s.outboxRowOf(Order, orderID, t))
	if !ok {
		fail("%s has no %s event in its outbox, want 1", orderID, t)
	}
	return row
}

// waitRelayed waits until the order service has sent every outbox event of
// the order, so a fail point armed afterwards hits a later event only.
func (s *session) waitRelayed(orderID string, n int) {
	s.waitUntil(fmt.Sprintf("%d events of %s relayed", n, orderID), func() (string, bool, error) {
		events, err := s.api.OrderEvents(s.ctx, orderID)
		return "", err == nil && len(events) == n && !slices.ContainsFunc(events, func(e orderEvent) bool {
			return e.Status != outbox.StatusSent
		}), err
	})
}

// paidOnce checks the side effects of the order's payment happened once:
// stock deducted by its quantity, one dedup row per consumer for eventID
// (its OrderPaid when ""), one ledger entry and one notification.
func (s *session) paidOnce(o drillOrder, eventID string) string {
	s.stockIs(o.sku, o.stock-o.quantity, o.quantity, "deducted once:")
	if eventID == "" {
		eventID = s.orderEvent(o.id, "OrderPaid").EventID
	}
	s.processedOnce(eventID)
	if eff := s.effects(o.id); !eff.are("DEDUCTED", 1, 1) {
		fail("%s: %s; want DEDUCTED, 1, 1", o.id, eff)
	}
	return fmt.Sprintf("deducted %d once, 1 dedup row per consumer, ledger 1, notifications 1", o.quantity)
}
