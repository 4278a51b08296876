package consumertest

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// Features says what a consumer does, so Run knows which scenarios apply
// to it and what to look for.
type Features struct {
	// Consumer is the consumer's name: its consumer group, and the name
	// its dead letters and metrics carry ("inventory-service").
	Consumer string
	// FailPoint is the fail point the consumer's apply function fires
	// ("inventory.apply"); armed with "error", an attempt fails as a
	// database outage would: retryably.
	FailPoint string
	// App is the directory of the consumer's application package, the one
	// its apply function is in, relative to the test's ("internal/app"):
	// it must import no database package, since the apply is handed a
	// unit of work (versionguard.UnitOfWork) that its adapters reach the
	// transaction through.
	App string
	// IgnoresRefunds is set for a consumer without a transition for
	// OrderRefunded: the scenarios that need one (a refund before its
	// payment, parking) are skipped, and the version guard's runs on a
	// payment alone.
	IgnoresRefunds bool
}

// Validate reports a Features the suite cannot run with.
func (f Features) Validate() error {
	var errs []error
	if f.Consumer == "" {
		errs = append(errs, errors.New("features: Consumer is required"))
	}
	if f.FailPoint == "" {
		errs = append(errs, errors.New("features: FailPoint is required (the fail point the apply function fires)"))
	}
	if f.App == "" {
		errs = append(errs, errors.New("features: App is required (the directory of the application package)"))
	}
	return errors.Join(errs...)
}

// Stage is how far an order's events have been applied.
type Stage int

// The stages Adapter.Want describes.
const (
	// Nothing of the order applied.
	Nothing Stage = iota
	// Paid: its OrderPaid applied.
	Paid
	// Refunded: its OrderPaid, then its OrderRefunded applied.
	Refunded
)

func (s Stage) String() string {
	switch s {
	case Nothing:
		return "nothing applied"
	case Paid:
		return "paid"
	case Refunded:
		return "paid and refunded"
	}
	return "stage " + strconv.Itoa(int(s))
}

// What every order of the suite buys: Units of a SKU of its own, for
// PaidAmount CNY, paid by a customer of its own; its refund gives all of it
// back.
const (
	Units      = 2
	PaidAmount = "80.00"
)

// Order is one order the suite sends events of.
type Order struct {
	// ID is the order's id, its events' aggregate and key.
	ID string
	// SKU is the one SKU it buys, Units of it.
	SKU string
	// Customer pays for it.
	Customer string
}

// NewOrder is order id with its own SKU and customer.
func NewOrder(id string) Order { return Order{ID: id, SKU: "SKU-" + id, Customer: "C-" + id} }

// Adapter is what a consumer's test gives Run to read what the consumer
// did.
type Adapter interface {
	// Effect describes, as one string to compare, everything the consumer
	// has done for o that its API shows: for a stock service the order's
	// state, the stock of o.SKU and its movements; for a ledger the
	// order's rows and the customer's balance.
	Effect(s *servicetest.Service, o Order) string
	// Want is what Effect must say of o once the events of stage were
	// applied, each once.
	Want(o Order, stage Stage) string
}

// Preparer is an Adapter that must set something up before an order's
// events arrive (the stock of its SKU); Run calls Prepare for every order
// before it sends the order's first event.
type Preparer interface {
	Prepare(s *servicetest.Service, o Order)
}

// maxAttempts is the RETRY_MAX_ATTEMPTS the suite runs the consumer with.
const maxAttempts = 4

// scenario is one case of the suite; skip says why it does not apply to a
// consumer with f ("" when it does).
type scenario struct {
	name string
	skip func(f Features) string
	run  func(t *testing.T, c *suite)
}

func needsRefunds(f Features) string {
	if f.IgnoresRefunds {
		return "the consumer ignores refunds"
	}
	return ""
}

// scenarios are the suite's cases, in the order Run runs them.
func scenarios() []scenario {
	return []scenario{
		{name: "a duplicate delivery is applied once", run: testDuplicate},
		{name: "a refund before its payment is parked and applied after it", skip: needsRefunds, run: testRefundBeforePayment},
		{name: "a late OrderCreated changes nothing", run: testLateCreated},
		{name: "an older event after a newer one does not regress", run: testStale},
		{name: "invalid JSON is dead-lettered with its reason and the partition goes on", run: testInvalidJSON},
		{name: "a retryable failure is retried until it applies once", run: testRetry},
		{name: "a dead letter replayed after the fix is applied once", run: testReplay},
		{name: "a replayed dead letter the order has moved past is ignored", run: testReplayStale},
		{name: "a parked event past the deadline is dead-lettered and its replay applied once", skip: needsRefunds, run: testParking},
		{name: "it starts before its broker and consumes once the broker is up", run: testBrokerLater},
		{name: "its application package imports no database package", run: testAppImports},
	}
}

// Run is the conformance suite of a consumer of order-events built on
// pkg/service: what the kit promises every consumer (deduplication, the
// version guard and its parking, the DLQ, retries, replay), proven
// against the real service on an embedded broker and a database of its
// own, through its API; and that its application package leaves the
// database to its adapters. Each scenario asserts the consumer's exact effect
// (adapter.Effect against adapter.Want), its dedup rows, dead letters and
// outcome counters, after every message it sent was consumed
// (servicetest.Service.Drained).
//
// run is the consumer's run(ctx, getenv, stdout), as Watermill's suite
// takes a constructor: the suite starts it through pkg/testkit/servicetest,
// with a broker or, to see it start before one, without. The scenarios run
// one after the other on one service; the parking scenario starts a second
// with a short PARK_DEADLINE.
func Run(t *testing.T, features Features, run servicetest.RunFunc, adapter Adapter) {
	t.Helper()
	if err := features.Validate(); err != nil {
		t.Fatal(err)
	}
	s := servicetest.Start(t, run, map[string]string{"RETRY_MAX_ATTEMPTS": strconv.Itoa(maxAttempts)})
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if sc.skip != nil {
				if why := sc.skip(features); why != "" {
					t.Skip(why)
				}
			}
			s.Bind(t)
			sc.run(t, &suite{t: t, f: features, run: run, a: adapter, s: s})
		})
	}
}

// suite is one scenario's view of the consumer under test.
type suite struct {
	t   *testing.T
	f   Features
	run servicetest.RunFunc
	a   Adapter
	s   *servicetest.Service
}

// order is order id, prepared for its events.
func (c *suite) order(id string) Order {
	c.t.Helper()
	o := NewOrder(id)
	if p, ok := c.a.(Preparer); ok {
		p.Prepare(c.s, o)
	}
	return o
}

func (c *suite) paid(o Order) event.Envelope {
	c.t.Helper()
	return Event(c.t, event.OrderPaid, o.ID, 3, PaidData(o.Customer, PaidAmount, Item(o.SKU, Units)))
}

func (c *suite) refunded(o Order) event.Envelope {
	c.t.Helper()
	all := Items(Item(o.SKU, Units))
	return Event(c.t, event.OrderRefunded, o.ID, 5, RefundedData(o.Customer, PaidAmount, all, all))
}

func (c *suite) created(o Order) event.Envelope {
	c.t.Helper()
	return Event(c.t, event.OrderCreated, o.ID, 1, event.OrderCreatedData{CustomerID: o.Customer, Currency: "CNY",
		Amount: Money(PaidAmount), Items: []event.PricedItem{{SKU: o.SKU, Quantity: Units, UnitPrice: Money("40.00")}}})
}

// last is the stage an order's events reach: refunded, unless the
// consumer ignores refunds.
func (c *suite) last() Stage {
	if c.f.IgnoresRefunds {
		return Paid
	}
	return Refunded
}

// expect fails the scenario unless the consumer's effect of o is that of
// stage.
func (c *suite) expect(o Order, stage Stage) {
	c.t.Helper()
	if got, want := c.a.Effect(c.s, o), c.a.Want(o, stage); got != want {
		c.t.Fatalf("effect of %s = %q, want %q (%s)", o.ID, got, want, stage)
	}
}

func (c *suite) processed(env event.Envelope, want int) {
	c.t.Helper()
	if got := c.s.ProcessedCount(env.EventID); got != want {
		c.t.Fatalf("%s %s recorded as processed %d times, want %d", env.EventType, env.EventID, got, want)
	}
}

func (c *suite) deadLetters(o Order, want int) []dlq.Record {
	c.t.Helper()
	dl := c.s.DeadLetters(o.ID)
	if dl.Count != want || len(dl.Items) != want {
		c.t.Fatalf("%d dead letters of %s, want %d: %+v", dl.Count, o.ID, want, dl.Items)
	}
	return dl.Items
}

// outcomes are the consumer's inbox outcomes counted so far, by outcome.
type outcomes map[versionguard.Outcome]float64

// allOutcomes are the outcomes the kit counts for every consumer.
func allOutcomes() []versionguard.Outcome {
	return []versionguard.Outcome{versionguard.Applied, versionguard.AppliedLateFact, versionguard.IgnoredStale,
		versionguard.WaitingForGap, inbox.Duplicate, inbox.NotHandled}
}

func (c *suite) outcomes() outcomes {
	c.t.Helper()
	out := outcomes{}
	for _, o := range allOutcomes() {
		out[o] = c.s.Counter("consumer_event_outcomes_total", `consumer="`+c.f.Consumer+`",outcome="`+string(o)+`"`)
	}
	return out
}

// expectOutcomes fails the scenario unless the outcomes counted since
// before are exactly want (every other outcome unchanged).
func (c *suite) expectOutcomes(before outcomes, want outcomes) {
	c.t.Helper()
	now := c.outcomes()
	for _, o := range allOutcomes() {
		if got := now[o] - before[o]; got != want[o] {
			c.t.Errorf("%s outcomes: %v, want %v", o, got, want[o])
		}
	}
	if c.t.Failed() {
		c.t.FailNow()
	}
}

func (c *suite) counter(name, labels string) float64 {
	c.t.Helper()
	return c.s.Counter(name, `consumer="`+c.f.Consumer+`"`+labels)
}

func (c *suite) expectDeadLetter(rec dlq.Record, env event.Envelope, class, reason string, attempts int) {
	c.t.Helper()
	if rec.EventID != env.EventID || rec.AggregateID != env.AggregateID || rec.EventType != string(env.EventType) ||
		rec.Consumer != c.f.Consumer || rec.OriginalTopic != c.s.Topic || rec.ErrorClass != class ||
		!strings.HasPrefix(rec.FailureReason, reason+": ") || rec.Attempts != attempts || rec.Status != dlq.StatusDead {
		c.t.Fatalf("dead letter %+v, want %s of %s %s from %s on %s, %s %s after %d attempts, DEAD",
			rec, env.EventType, env.AggregateID, env.EventID, c.f.Consumer, c.s.Topic, class, reason, attempts)
	}
}

func (c *suite) replay(rec dlq.Record, want string) {
	c.t.Helper()
	if res := c.s.Replay(rec.ID); res.Outcome != want || res.EventID != rec.EventID || res.OriginalTopic != c.s.Topic {
		c.t.Fatalf("replay of dead letter %d = %+v, want %s of %s to %s", rec.ID, res, want, rec.EventID, c.s.Topic)
	}
}

func (c *suite) failPoint(hits int) {
	c.t.Helper()
	if p := c.s.FailPoint(c.f.FailPoint); p.Hits != hits || p.Remaining != 0 {
		c.t.Fatalf("fail point %+v, want %d hits, spent", p, hits)
	}
}

// Every copy of a payment is read before the effect is counted: one
// effect, one dedup row, one APPLIED and a DUPLICATE for each other copy.
func testDuplicate(_ *testing.T, c *suite) {
	o := c.order("O-dup")
	before := c.outcomes()
	paid := c.paid(o)
	c.s.Publish(paid, paid, paid)
	c.s.Drained(c.f.Consumer)

	c.expect(o, Paid)
	c.processed(paid, 1)
	c.expectOutcomes(before, outcomes{versionguard.Applied: 1, inbox.Duplicate: 2})
	c.deadLetters(o, 0)
}

// A refund that overtakes its payment waits (WAITING_FOR_GAP, nothing
// applied) and is applied right after the payment, once.
func testRefundBeforePayment(_ *testing.T, c *suite) {
	o := c.order("O-reorder")
	before := c.outcomes()
	refund, paid := c.refunded(o), c.paid(o)
	c.s.Publish(refund)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Nothing)
	c.expectOutcomes(before, outcomes{versionguard.WaitingForGap: 1})

	c.s.Publish(paid)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Refunded)
	c.expectOutcomes(before, outcomes{versionguard.WaitingForGap: 1, versionguard.Applied: 1})
	c.processed(refund, 1)
	c.processed(paid, 1)
	c.deadLetters(o, 0)
}

// The order's creation, read after its payment, is older than what the
// consumer applied: it changes nothing, and is no failure.
func testLateCreated(t *testing.T, c *suite) {
	o := c.order("O-late")
	before := c.outcomes()
	c.s.Publish(c.paid(o), c.created(o))
	c.s.Drained(c.f.Consumer)

	c.expect(o, Paid)
	now := c.outcomes()
	late := now[versionguard.IgnoredStale] - before[versionguard.IgnoredStale] + now[inbox.NotHandled] - before[inbox.NotHandled]
	if applied := now[versionguard.Applied] - before[versionguard.Applied]; applied != 1 || late != 1 {
		t.Fatalf("%v APPLIED and %v IGNORED_STALE_EVENT or NOT_HANDLED outcomes, want 1 and 1", applied, late)
	}
	c.deadLetters(o, 0)
}

// Another event at a version the consumer has applied (here a payment of
// more goods under a new event id) is stale: ignored, whatever it says.
func testStale(t *testing.T, c *suite) {
	o := c.order("O-stale")
	before := c.outcomes()
	c.s.Publish(c.paid(o))
	want := outcomes{versionguard.Applied: 1, versionguard.IgnoredStale: 1}
	if !c.f.IgnoresRefunds {
		c.s.Publish(c.refunded(o))
		want[versionguard.Applied]++
	}
	older := Event(t, event.OrderPaid, o.ID, 3, PaidData(o.Customer, "200.00", Item(o.SKU, 5)))
	c.s.Publish(older)
	c.s.Drained(c.f.Consumer)

	c.expect(o, c.last())
	c.expectOutcomes(before, want)
	c.processed(older, 1)
	c.deadLetters(o, 0)
}

// A message that is not JSON cannot be fixed by a retry: dead-lettered at
// once, with its bytes and reason, and the order's next event is applied.
func testInvalidJSON(t *testing.T, c *suite) {
	o := c.order("O-bad")
	permanent := c.counter("consumer_dead_letters_total", `,error_class="PERMANENT"`)
	raw := []byte(`{"eventId": "E-broken", not json`)
	c.s.PublishRaw(o.ID, raw)
	c.s.Publish(c.paid(o))
	c.s.Drained(c.f.Consumer)

	c.expect(o, Paid)
	rec := c.deadLetters(o, 1)[0]
	if rec.EventID != "" || rec.AggregateID != o.ID || string(rec.Key) != o.ID || string(rec.Value) != string(raw) ||
		rec.Consumer != c.f.Consumer || rec.OriginalTopic != c.s.Topic || rec.ErrorClass != "PERMANENT" ||
		!strings.HasPrefix(rec.FailureReason, event.ReasonInvalidJSON+": ") || rec.Attempts != 1 || rec.Status != dlq.StatusDead {
		t.Fatalf("dead letter %+v, want the message as sent, keyed %s, from %s on %s, PERMANENT %s after 1 attempt",
			rec, o.ID, c.f.Consumer, c.s.Topic, event.ReasonInvalidJSON)
	}
	if got := c.counter("consumer_dead_letters_total", `,error_class="PERMANENT"`) - permanent; got != 1 {
		t.Fatalf("PERMANENT dead letters counted: %v, want 1", got)
	}
}

// Two failed attempts, then the third applies: two retries, one effect,
// no dead letter.
func testRetry(t *testing.T, c *suite) {
	o := c.order("O-retry")
	failed := c.counter("consumer_messages_total", `,outcome="error"`)
	retries := c.counter("consumer_retries_total", "")
	c.s.SetFailPoint(c.f.FailPoint, failpoint.ActionError, 2)
	paid := c.paid(o)
	c.s.Publish(paid)
	c.s.Drained(c.f.Consumer)

	c.failPoint(2)
	c.expect(o, Paid)
	c.processed(paid, 1)
	c.deadLetters(o, 0)
	if got := c.counter("consumer_messages_total", `,outcome="error"`) - failed; got != 2 {
		t.Fatalf("failed attempts: %v, want 2", got)
	}
	if got := c.counter("consumer_retries_total", "") - retries; got != 2 {
		t.Fatalf("retries: %v, want 2", got)
	}
}

// A failure that outlasts the retry bound dead-letters the event as
// RETRYABLE with nothing applied; replayed after the fix it is applied
// once, and a second replay sends nothing.
func testReplay(t *testing.T, c *suite) {
	o := c.order("O-replay")
	c.s.SetFailPoint(c.f.FailPoint, failpoint.ActionError, maxAttempts+1)
	paid := c.paid(o)
	c.s.Publish(paid)
	c.s.Drained(c.f.Consumer)
	c.s.SetFailPoint(c.f.FailPoint, failpoint.ActionOff, 0) // the fix
	if p := c.s.FailPoint(c.f.FailPoint); p.Hits != maxAttempts {
		t.Fatalf("fail point %+v, want %d hits, one per attempt", p, maxAttempts)
	}
	rec := c.deadLetters(o, 1)[0]
	c.expectDeadLetter(rec, paid, "RETRYABLE", "HANDLER_ERROR", maxAttempts)
	c.expect(o, Nothing)
	c.processed(paid, 0)

	c.replay(rec, dlq.OutcomeApplied)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Paid)
	c.processed(paid, 1)
	if got := c.deadLetters(o, 1)[0].Status; got != dlq.StatusReplayed {
		t.Fatalf("dead letter %s after its replay, want REPLAYED", got)
	}

	c.replay(rec, dlq.OutcomeAlreadyReplayed)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Paid)
	c.processed(paid, 1)
}

// A dead letter of a payment whose version has since been applied under
// another event id is stale when replayed: ignored, nothing applied twice.
func testReplayStale(_ *testing.T, c *suite) {
	o := c.order("O-replay-stale")
	c.s.SetFailPoint(c.f.FailPoint, failpoint.ActionError, maxAttempts)
	paid := c.paid(o)
	c.s.Publish(paid)
	c.s.Drained(c.f.Consumer)
	c.failPoint(maxAttempts)
	rec := c.deadLetters(o, 1)[0]
	c.expectDeadLetter(rec, paid, "RETRYABLE", "HANDLER_ERROR", maxAttempts)

	again := c.paid(o) // the same payment, sent again under a new event id
	c.s.Publish(again)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Paid)

	before := c.outcomes()
	c.replay(rec, dlq.OutcomeIgnoredStale)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Paid)
	c.expectOutcomes(before, outcomes{versionguard.IgnoredStale: 1})
	c.processed(paid, 1)
	c.replay(rec, dlq.OutcomeAlreadyReplayed)
}

// A consumer started while no broker listens serves HTTP at once, says
// it is retrying, and applies what is published once the broker is up:
// a suite started in any order comes up.
func testBrokerLater(t *testing.T, c *suite) {
	s := servicetest.StartWithoutBroker(t, c.run, nil)
	c = &suite{t: t, f: c.f, a: c.a, s: s}
	s.WaitFor("a reconnect warning", func() bool { return strings.Contains(s.Logs(), consumer.ReconnectWarning) })
	if code, _ := s.Do(http.MethodGet, "/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz = %d while the broker is down, want 200", code)
	}
	s.StartBroker()
	o := c.order("O-late-broker")
	paid := c.paid(o)
	s.Publish(paid)
	s.Drained(c.f.Consumer)
	c.expect(o, Paid)
	c.processed(paid, 1)
}

// With PARK_DEADLINE=1s, a refund whose payment never comes is
// dead-lettered PERMANENT WAITING_FOR_GAP with nothing applied, and its
// dedup row dropped: when the payment comes after all, the replayed
// refund is applied, once.
func testParking(t *testing.T, c *suite) {
	s := servicetest.Start(t, c.run, map[string]string{"PARK_DEADLINE": "1s", "PARK_SWEEP_INTERVAL": "50ms"})
	c = &suite{t: t, f: c.f, a: c.a, s: s}
	o := c.order("O-park")
	refund := c.refunded(o)
	c.s.Publish(refund)
	c.s.WaitFor("the parked refund dead-lettered", func() bool { return c.s.DeadLetters(o.ID).Count > 0 })
	rec := c.deadLetters(o, 1)[0]
	c.expectDeadLetter(rec, refund, "PERMANENT", "WAITING_FOR_GAP", 1)
	c.expect(o, Nothing)
	c.processed(refund, 0)
	if got := c.counter("consumer_gap_timeouts_total", ""); got != 1 {
		t.Fatalf("consumer_gap_timeouts_total = %v, want 1", got)
	}
	c.s.WaitFor("the parked gauge back at 0", func() bool { return c.counter("consumer_parked_events", "") == 0 })

	paid := c.paid(o)
	c.s.Publish(paid)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Paid)

	c.replay(rec, dlq.OutcomeApplied)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Refunded)
	c.processed(refund, 1)
	c.processed(paid, 1)
	c.replay(rec, dlq.OutcomeAlreadyReplayed)
	c.s.Drained(c.f.Consumer)
	c.expect(o, Refunded)
}

// Position is how far the consumer's version guard has applied orderID,
// as its reconciliation view (POST /admin/reconciliation/orders) says.
func Position(s *servicetest.Service, orderID string) versionguard.Position {
	s.T().Helper()
	body, err := json.Marshal(admin.OrderIDsRequest{OrderIDs: []string{orderID}})
	if err != nil {
		s.T().Fatal(err)
	}
	code, raw := s.Do(http.MethodPost, "/admin/reconciliation/orders", string(body))
	var out admin.ReconciliationViews[admin.ConsumerFacts]
	if code != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Orders) != 1 {
		s.T().Fatalf("reconciliation view of %s: %d %s", orderID, code, raw)
	}
	return out.Orders[0].Consumer
}
