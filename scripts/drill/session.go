package drill

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// session is one case's connection to the suite: the suite's API client,
// the ids the case creates, and the convergence time the case measured.
type session struct {
	ctx  context.Context
	t    Target
	slug string // the case's part of every id
	api  *suiteapi.Client

	converged time.Duration
	// plants are the synthetic orders the case planted (planted), removed
	// once its verdict is taken.
	plants plantings
}

func newSession(ctx context.Context, t Target, slug string) *session {
	return &session{ctx: ctx, t: t, slug: slug, api: suiteapi.New(suiteapi.Config{
		URLs: t.URLs, AdminToken: t.AdminToken, HTTPClient: t.HTTPClient, Brokers: t.Brokers, Topic: t.Topic,
	})}
}

func (s *session) close() { s.api.Close() }

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
func (s *session) waitFired(service, name string, atLeast int) error {
	hits := 0
	if _, err := s.waitUntil(fmt.Sprintf("%s fail point %s to fire %d times", service, name, atLeast), func() (bool, error) {
		var err error
		hits, err = s.api.FailPointHits(s.ctx, service, name)
		return hits >= atLeast, err
	}); err != nil {
		return fmt.Errorf("%w (fired %d times)", err, hits)
	}
	return nil
}

// waitUntil polls cond until it holds and returns how long that took. It
// fails after the target's timeout, with what and cond's last error.
func (s *session) waitUntil(what string, cond func() (bool, error)) (time.Duration, error) {
	return s.api.WaitFor(s.ctx, s.t.Timeout, what, cond)
}

// The suite's answers the drills read.
type (
	stock         = suiteapi.Stock
	orderView     = suiteapi.OrderView
	commandResult = suiteapi.CommandResult
	orderEvent    = suiteapi.OrderEvent
	outboxStatus  = suiteapi.OutboxStatus
	deadLetter    = suiteapi.DeadLetter
)

// effects is every side effect of one order the drills count.
type effects struct {
	Inventory     string // the inventory consumer's state for the order
	Ledger        []suiteapi.PointsEntry
	Notifications []suiteapi.Notice
}

func (e effects) String() string {
	return fmt.Sprintf("inventory %s, ledger %d, notifications %d", e.Inventory, len(e.Ledger), len(e.Notifications))
}

// effects reads what the consumers did for an order.
func (s *session) effects(orderID string) (effects, error) {
	inv, ierr := s.api.InventoryState(s.ctx, orderID)
	ledger, lerr := s.api.PointsLedger(s.ctx, orderID)
	notes, nerr := s.api.Notifications(s.ctx, orderID)
	return effects{Inventory: inv, Ledger: ledger, Notifications: notes}, errors.Join(ierr, lerr, nerr)
}

// waitEffects waits until the order's effects are want (inventory state,
// ledger entries, notifications) and returns how long that took.
func (s *session) waitEffects(orderID, inventory string, ledger, notifications int) (time.Duration, error) {
	var last effects
	took, err := s.waitUntil(fmt.Sprintf("%s: inventory %s, ledger %d, notifications %d", orderID, inventory, ledger, notifications),
		func() (bool, error) {
			var err error
			last, err = s.effects(orderID)
			return last.Inventory == inventory && len(last.Ledger) == ledger && len(last.Notifications) == notifications, err
		})
	if err != nil {
		return took, fmt.Errorf("%w; seen %s", err, last)
	}
	return took, nil
}

// processedOnce checks every consumer holds exactly one dedup row for eventID.
func (s *session) processedOnce(eventID string) error {
	for _, c := range consumers {
		n, err := s.api.ProcessedEventCount(s.ctx, c, eventID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%s holds %d dedup rows for %s, want 1", c, n, eventID)
		}
	}
	return nil
}

// waitDeadLetter waits until service has dead-lettered one message of
// aggregateID and returns it. A retryable failure takes the retry schedule
// to get there, so the wait allows three times its bound on top of the
// timeout: a slow schedule is then reported for what it is, not as a
// timeout.
func (s *session) waitDeadLetter(service, aggregateID string) (deadLetter, time.Duration, error) {
	var dl []deadLetter
	took, err := s.api.WaitFor(s.ctx, s.t.Timeout+3*s.t.RetryBound(), service+" dead-letters "+aggregateID, func() (bool, error) {
		var err error
		dl, err = s.api.DeadLetters(s.ctx, service, aggregateID, "")
		return len(dl) > 0, err
	})
	if err != nil {
		return deadLetter{}, took, err
	}
	if len(dl) != 1 {
		return deadLetter{}, took, fmt.Errorf("%s holds %d dead letters for %s, want 1", service, len(dl), aggregateID)
	}
	return dl[0], took, nil
}

// handled is how many messages the consumer has handled without error
// (consumer_messages_total{outcome="ok"}): a duplicate, a stale event and an
// event the consumer has no rule for all count, so it shows that a copy was
// read even when it changed nothing.
func (s *session) handled(service string) (float64, error) {
	return s.api.Metric(s.ctx, service, "consumer_messages_total", map[string]string{"outcome": "ok"})
}

// handledNow reads handled for every consumer.
func (s *session) handledNow() (map[string]float64, error) {
	out := map[string]float64{}
	for _, c := range consumers {
		n, err := s.handled(c)
		if err != nil {
			return nil, err
		}
		out[c] = n
	}
	return out, nil
}

// waitHandled waits until every consumer has handled at least n more
// messages than before.
func (s *session) waitHandled(before map[string]float64, n int) (time.Duration, error) {
	return s.waitUntil(fmt.Sprintf("each consumer reads %d more messages", n), func() (bool, error) {
		for _, c := range consumers {
			now, err := s.handled(c)
			if err != nil || now < before[c]+float64(n) {
				return false, err
			}
		}
		return true, nil
	})
}

// sameKeyPartition returns an order id, made from base, whose key lands on
// partition p of n — where the default (murmur2) partitioner of every
// client in the suite puts it.
func (s *session) sameKeyPartition(base string, p int32, n int) (string, error) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(s.t.Topic)
	for i := range 10 * n {
		id := base + strconv.Itoa(i)
		if int32(part.Partition(&kgo.Record{Key: []byte(id)}, n)) == p {
			return id, nil
		}
	}
	return "", fmt.Errorf("no order id from %s lands on partition %d of %d", base, p, n)
}

// orderEvents builds the events of one synthetic order, as the order
// service would emit them, for cases that publish straight to the broker
// (session.newOrderEvents, which records the order as planted).
type orderEvents struct {
	orderID  string
	sku      string
	quantity int
	amount   event.Money
	// plants, if set, records the id of every event built.
	plants *plantings
}

func newOrderEvents(orderID, sku string, quantity int, amount string) (orderEvents, error) {
	m, err := event.ParseMoney(amount)
	if err != nil {
		return orderEvents{}, fmt.Errorf("amount %q: %w", amount, err)
	}
	return orderEvents{orderID: orderID, sku: sku, quantity: quantity, amount: m}, nil
}

func (o orderEvents) build(t event.Type, version int64, data any) (event.Envelope, error) {
	env, err := event.New(t, event.Meta{AggregateID: o.orderID, AggregateVersion: version, Producer: "drill"}, data)
	if err == nil && o.plants != nil {
		o.plants.add(o.orderID, env.EventID)
	}
	return env, err
}

func (o orderEvents) created() (event.Envelope, error) {
	return o.build(event.OrderCreated, 1, event.OrderCreatedData{CustomerID: "C-drill", Currency: "CNY", Amount: o.amount,
		Items: []event.PricedItem{{SKU: o.sku, Quantity: o.quantity, UnitPrice: o.amount}}})
}

func (o orderEvents) paid() (event.Envelope, error) {
	return o.build(event.OrderPaid, 3, event.OrderPaidData{PaymentID: "P-" + o.orderID, PaidAmount: o.amount, Currency: "CNY",
		CustomerID: "C-drill", Items: []event.Item{{SKU: o.sku, Quantity: o.quantity}}})
}

func (o orderEvents) refunded() (event.Envelope, error) {
	items := []event.Item{{SKU: o.sku, Quantity: o.quantity}}
	return o.build(event.OrderRefunded, 5, event.OrderRefundedData{RefundID: "R-" + o.orderID, PaymentID: "P-" + o.orderID,
		RefundedAmount: o.amount, TotalRefundedAmount: o.amount, Currency: "CNY", CustomerID: "C-drill",
		Items: items, TotalReturnedItems: items})
}

// placeOrder creates and checks out an order of quantity × sku at unitPrice
// for the drills' customer and returns its amount.
func (s *session) placeOrder(orderID, sku string, quantity int, unitPrice string) (string, error) {
	return s.api.PlaceOrder(s.ctx, suiteapi.NewOrder{OrderID: orderID, CustomerID: "C-drill", Currency: "CNY",
		Items: []suiteapi.Item{{SKU: sku, Quantity: quantity, UnitPrice: unitPrice}}})
}

// pay pays an order through the payment service.
func (s *session) pay(orderID, amount string) error {
	res, err := s.api.Pay(s.ctx, suiteapi.PaymentRequest{OrderID: orderID, Amount: amount, Currency: "CNY"})
	if err != nil {
		return err
	}
	if res.BusinessCode != suiteapi.Success {
		return fmt.Errorf("pay %s: businessCode %s", orderID, res.BusinessCode)
	}
	return nil
}

// paidOrder places and pays an order of quantity × unitPrice for a SKU of
// its own, with stock in stock, and waits until every consumer has applied
// the payment.
func (s *session) paidOrder(suffix string, quantity int, unitPrice string, stock int) (orderID, sku, amount string, err error) {
	orderID, sku = s.orderID(suffix), s.sku(suffix)
	if err := s.api.SetStock(s.ctx, sku, stock); err != nil {
		return "", "", "", err
	}
	if amount, err = s.placeOrder(orderID, sku, quantity, unitPrice); err != nil {
		return "", "", "", err
	}
	if err := s.pay(orderID, amount); err != nil {
		return "", "", "", err
	}
	if _, err := s.waitEffects(orderID, "DEDUCTED", 1, 1); err != nil {
		return "", "", "", err
	}
	return orderID, sku, amount, nil
}

// ledgerPoints adds up an order's points ledger.
func ledgerPoints(ledger []suiteapi.PointsEntry) int64 {
	var points int64
	for _, e := range ledger {
		points += e.Points
	}
	return points
}

// orderEvent returns the order's only outbox event of type t.
func (s *session) orderEvent(orderID, t string) (orderEvent, error) {
	events, err := s.api.OrderEvents(s.ctx, orderID)
	if err != nil {
		return orderEvent{}, err
	}
	var found []orderEvent
	for _, e := range events {
		if e.EventType == t {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		return orderEvent{}, fmt.Errorf("%s has %d %s events in its outbox, want 1", orderID, len(found), t)
	}
	return found[0], nil
}

// waitRelayed waits until the order service has sent every outbox event of
// the order, so a fail point armed afterwards hits a later event only.
func (s *session) waitRelayed(orderID string, n int) error {
	_, err := s.waitUntil(fmt.Sprintf("%d events of %s relayed", n, orderID), func() (bool, error) {
		events, err := s.api.OrderEvents(s.ctx, orderID)
		if err != nil || len(events) != n {
			return false, err
		}
		for _, e := range events {
			if e.Status != outbox.StatusSent {
				return false, nil
			}
		}
		return true, nil
	})
	return err
}

// paidOnce checks the side effects of one payment of quantity × sku
// happened once: stock deducted by quantity from available, one dedup row
// per consumer, one ledger entry and one notification.
func (s *session) paidOnce(orderID, eventID, sku string, available, quantity int) (string, error) {
	st, err := s.api.Stock(s.ctx, sku)
	if err != nil {
		return "", err
	}
	if st.Deducted != quantity || st.Available != available-quantity {
		return "", fmt.Errorf("stock of %s is %d available, %d deducted; want %d, %d (deducted once)",
			sku, st.Available, st.Deducted, available-quantity, quantity)
	}
	if eventID != "" {
		if err := s.processedOnce(eventID); err != nil {
			return "", err
		}
	}
	eff, err := s.effects(orderID)
	if err != nil {
		return "", err
	}
	if eff.Inventory != "DEDUCTED" || len(eff.Ledger) != 1 || len(eff.Notifications) != 1 {
		return "", fmt.Errorf("%s: %s; want DEDUCTED, 1, 1", orderID, eff)
	}
	return fmt.Sprintf("deducted %d once, 1 dedup row per consumer, ledger 1, notifications 1", quantity), nil
}
