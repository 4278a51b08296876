package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// pollInterval is how often a wait re-reads the suite.
const pollInterval = 50 * time.Millisecond

// session is one case's connection to the suite: the HTTP calls, the Kafka
// producer and the waits, plus the convergence time the case measured.
type session struct {
	ctx  context.Context
	t    Target
	slug string // the case's part of every id

	mu    sync.Mutex
	kafka *kgo.Client

	converged time.Duration
}

func newSession(ctx context.Context, t Target, slug string) *session {
	return &session{ctx: ctx, t: t, slug: slug}
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kafka != nil {
		s.kafka.Close()
	}
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
type StatusError struct {
	Method, URL string
	Status      int
	Body        string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s answered %d: %s", e.Method, e.URL, e.Status, strings.TrimSpace(e.Body))
}

// call sends a request to a service and decodes a 2xx JSON answer into out
// (if not nil). Admin paths carry the admin token.
func (s *session) call(service, method, path string, body, out any) error {
	_, err := s.callStatus(service, method, path, body, out, nil)
	return err
}

// callStatus is call that also accepts the statuses in ok and returns the
// status it got.
func (s *session) callStatus(service, method, path string, body, out any, ok []int) (int, error) {
	return s.do(service, method, path, nil, body, out, ok)
}

// do is callStatus with extra request headers.
func (s *session) do(service, method, path string, header http.Header, body, out any, ok []int) (int, error) {
	u := strings.TrimRight(s.t.URLs[service], "/") + path
	var r io.Reader
	if body != nil {
		raw, isRaw := body.([]byte)
		if !isRaw {
			var err error
			if raw, err = json.Marshal(body); err != nil {
				return 0, fmt.Errorf("encode %s %s: %w", method, u, err)
			}
		}
		r = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(s.ctx, method, u, r)
	if err != nil {
		return 0, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if s.t.AdminToken != "" && strings.HasPrefix(path, "/admin/") {
		req.Header.Set("Authorization", "Bearer "+s.t.AdminToken)
	}
	resp, err := s.t.HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, u, err)
	}
	accepted := resp.StatusCode/100 == 2
	for _, code := range ok {
		accepted = accepted || resp.StatusCode == code
	}
	if !accepted {
		return resp.StatusCode, &StatusError{Method: method, URL: u, Status: resp.StatusCode, Body: string(raw)}
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: answer is not the JSON expected: %w", method, u, err)
		}
	}
	return resp.StatusCode, nil
}

// waitUntil polls cond until it holds and returns how long that took. It
// fails after the target's timeout, with what and cond's last error.
func (s *session) waitUntil(what string, cond func() (bool, error)) (time.Duration, error) {
	return s.waitFor(s.t.Timeout, what, cond)
}

// waitFor is waitUntil with its own timeout.
func (s *session) waitFor(timeout time.Duration, what string, cond func() (bool, error)) (time.Duration, error) {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok && err == nil {
			return time.Since(start), nil
		}
		select {
		case <-s.ctx.Done():
			return time.Since(start), s.ctx.Err()
		case <-deadline.C:
			if err != nil {
				return time.Since(start), fmt.Errorf("%s: not within %s (last: %v)", what, timeout, err)
			}
			return time.Since(start), fmt.Errorf("%s: not within %s", what, timeout)
		case <-tick.C:
		}
	}
}

// The suite's answers the drills read.
type (
	stock struct {
		SKU       string `json:"sku"`
		Available int    `json:"available"`
		Deducted  int    `json:"deducted"`
	}
	orderView struct {
		OrderID string `json:"orderId"`
		Status  string `json:"status"`
		Version int64  `json:"version"`
		Amount  string `json:"amount"`
	}
	commandResult struct {
		BusinessCode string `json:"businessCode"`
		Status       string `json:"status"`
		Version      int64  `json:"version"`
		Amount       string `json:"amount"`
	}
	orderEvent struct {
		EventID          string `json:"eventId"`
		EventType        string `json:"eventType"`
		AggregateVersion int64  `json:"aggregateVersion"`
		Status           string `json:"status"`
		Attempts         int    `json:"attempts"`
	}
	outboxStatus struct {
		EventID  string `json:"eventId"`
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
	}
	pointsEntry struct {
		EventID string `json:"eventId"`
		Points  int64  `json:"points"`
	}
	notification struct {
		EventID string `json:"eventId"`
		Kind    string `json:"kind"`
	}
	// deadLetter is a DLQ record with the metadata of docs/design.md, Dead
	// letters.
	deadLetter struct {
		ID             int64     `json:"id"`
		Consumer       string    `json:"consumer"`
		EventID        string    `json:"eventId"`
		AggregateID    string    `json:"aggregateId"`
		OriginalTopic  string    `json:"originalTopic"`
		FailureReason  string    `json:"failureReason"`
		ErrorClass     string    `json:"errorClass"`
		Attempts       int       `json:"attempts"`
		FirstFailedAt  time.Time `json:"firstFailedAt"`
		DeadLetteredAt time.Time `json:"deadLetteredAt"`
		Status         string    `json:"status"`
	}
	replayResult struct {
		ID      int64  `json:"id"`
		EventID string `json:"eventId"`
		Outcome string `json:"outcome"`
	}
)

// effects is every side effect of one order the drills count.
type effects struct {
	Inventory     string // the inventory consumer's state for the order
	Ledger        []pointsEntry
	Notifications []notification
}

func (e effects) String() string {
	return fmt.Sprintf("inventory %s, ledger %d, notifications %d", e.Inventory, len(e.Ledger), len(e.Notifications))
}

func (s *session) seedStock(sku string, available int) error {
	return s.call(Inventory, "PUT", "/inventory/"+url.PathEscape(sku), map[string]int{"available": available}, nil)
}

func (s *session) stock(sku string) (stock, error) {
	var st stock
	err := s.call(Inventory, "GET", "/inventory/"+url.PathEscape(sku), nil, &st)
	return st, err
}

// effects reads what the consumers did for an order.
func (s *session) effects(orderID string) (effects, error) {
	var inv struct {
		Status string `json:"status"`
	}
	var points struct {
		Entries []pointsEntry `json:"entries"`
	}
	var notes struct {
		Items []notification `json:"items"`
	}
	id := url.PathEscape(orderID)
	err := errors.Join(
		s.call(Inventory, "GET", "/inventory/orders/"+id, nil, &inv),
		s.call(Points, "GET", "/points/orders/"+id, nil, &points),
		s.call(Notification, "GET", "/notifications?orderId="+url.QueryEscape(orderID), nil, &notes),
	)
	return effects{Inventory: inv.Status, Ledger: points.Entries, Notifications: notes.Items}, err
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

// processed is a consumer's dedup row count for an event (0 or 1).
func (s *session) processed(service, eventID string) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	err := s.call(service, "GET", "/admin/processed-events/"+url.PathEscape(eventID), nil, &out)
	return out.Count, err
}

// processedOnce checks every consumer holds exactly one dedup row for eventID.
func (s *session) processedOnce(eventID string) error {
	for _, c := range consumers {
		n, err := s.processed(c, eventID)
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%s holds %d dedup rows for %s, want 1", c, n, eventID)
		}
	}
	return nil
}

func (s *session) deadLetters(service, aggregateID string) ([]deadLetter, error) {
	var out struct {
		Items []deadLetter `json:"items"`
	}
	err := s.call(service, "GET", "/admin/dlq?aggregateId="+url.QueryEscape(aggregateID), nil, &out)
	return out.Items, err
}

// waitDeadLetter waits until service has dead-lettered one message of
// aggregateID and returns it. A retryable failure takes the retry schedule
// to get there, so the wait allows three times its bound on top of the
// timeout: a slow schedule is then reported for what it is, not as a
// timeout.
func (s *session) waitDeadLetter(service, aggregateID string) (deadLetter, time.Duration, error) {
	var dl []deadLetter
	took, err := s.waitFor(s.t.Timeout+3*s.t.RetryBound(), service+" dead-letters "+aggregateID, func() (bool, error) {
		var err error
		dl, err = s.deadLetters(service, aggregateID)
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

// replay replays a dead letter in the name of requestedBy, who the audit
// records (X-Requested-By, pkg/admin).
func (s *session) replay(service string, id int64, requestedBy string) (replayResult, error) {
	var out replayResult
	_, err := s.do(service, "POST", "/admin/dlq/"+strconv.FormatInt(id, 10)+"/replay",
		http.Header{"X-Requested-By": {requestedBy}}, nil, &out, nil)
	return out, err
}

// replayAudit is one audited replay request of a dead letter.
type replayAudit struct {
	RequestedBy string `json:"requestedBy"`
	RequestedAt string `json:"requestedAt"`
	Outcome     string `json:"outcome"`
}

// inspect reads a dead letter and the audit of its replays
// (GET /admin/dlq/{id}), oldest first.
func (s *session) inspect(service string, id int64) (deadLetter, []replayAudit, error) {
	var out struct {
		deadLetter
		Replays []replayAudit `json:"replays"`
	}
	err := s.call(service, "GET", "/admin/dlq/"+strconv.FormatInt(id, 10), nil, &out)
	return out.deadLetter, out.Replays, err
}

// armFailPoint arms a fail point of a service at run time; times 0 fires
// every time, action "off" disarms it.
func (s *session) armFailPoint(service, name, action string, times int) error {
	code, err := s.callStatus(service, "PUT", "/admin/failpoints/"+url.PathEscape(name), map[string]any{"action": action, "times": times}, nil, nil)
	if code == http.StatusNotFound {
		return fmt.Errorf("%s serves no fail points: start it with FAILPOINTS_ENABLED=true (make run does; compose: FAILPOINTS_ENABLED=true make up): %w", service, err)
	}
	return err
}

// metric sums the samples of a counter on a service's /metrics whose labels
// include labels.
func (s *session) metric(service, name string, labels map[string]string) (float64, error) {
	u := strings.TrimRight(s.t.URLs[service], "/") + "/metrics"
	req, err := http.NewRequestWithContext(s.ctx, "GET", u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.t.HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &StatusError{Method: "GET", URL: u, Status: resp.StatusCode}
	}
	return sumSamples(resp.Body, name, labels)
}

// handled is how many messages the consumer has handled without error
// (consumer_messages_total{outcome="ok"}): a duplicate, a stale event and an
// event the consumer has no rule for all count, so it shows that a copy was
// read even when it changed nothing.
func (s *session) handled(service string) (float64, error) {
	return s.metric(service, "consumer_messages_total", map[string]string{"outcome": "ok"})
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

// producer returns the session's Kafka client, connecting on first use.
func (s *session) producer() (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kafka == nil {
		cl, err := newProducer(s.t.Brokers)
		if err != nil {
			return nil, err
		}
		s.kafka = cl
	}
	return s.kafka, nil
}

func newProducer(brokers []string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0))
	if err != nil {
		return nil, fmt.Errorf("kafka client for %v: %w", brokers, err)
	}
	return cl, nil
}

// record is env as the outbox relay publishes it: key = aggregateId and the
// contract's headers.
func record(topic string, env event.Envelope) (*kgo.Record, error) {
	raw, err := env.Marshal()
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(env.AggregateID), Value: raw, Headers: []kgo.RecordHeader{
		{Key: event.HeaderEventID, Value: []byte(env.EventID)},
		{Key: event.HeaderEventType, Value: []byte(env.EventType)},
		{Key: event.HeaderEventVersion, Value: []byte(strconv.Itoa(env.EventVersion))},
		{Key: event.HeaderAggregateID, Value: []byte(env.AggregateID)},
		{Key: event.HeaderTraceparent, Value: []byte(env.Traceparent())},
	}}, nil
}

// publish writes envelopes straight to the order-events topic, as another
// producer, or a duplicate delivery, would.
func (s *session) publish(envs ...event.Envelope) error {
	recs := make([]*kgo.Record, len(envs))
	for i, env := range envs {
		r, err := record(s.t.Topic, env)
		if err != nil {
			return err
		}
		recs[i] = r
	}
	_, err := s.produce(recs...)
	return err
}

// produce writes records and returns them as the broker placed them, in
// the order the broker acknowledged them (not necessarily recs' order).
func (s *session) produce(recs ...*kgo.Record) ([]*kgo.Record, error) {
	cl, err := s.producer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("publish to %s: %w", s.t.Topic, err)
	}
	out := make([]*kgo.Record, len(res))
	for i, r := range res {
		out[i] = r.Record
	}
	return out, nil
}

// partitions is the topic's partition count, from the broker's metadata.
func (s *session) partitions() (int, error) {
	cl, err := s.producer()
	if err != nil {
		return 0, err
	}
	req := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr(s.t.Topic)
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(s.ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", s.t.Topic, err)
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == s.t.Topic && len(t.Partitions) > 0 {
			return len(t.Partitions), nil
		}
	}
	return 0, fmt.Errorf("metadata of %s: no partitions", s.t.Topic)
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
// service would emit them, for cases that publish straight to the broker.
type orderEvents struct {
	orderID  string
	sku      string
	quantity int
	amount   event.Money
}

func newOrderEvents(orderID, sku string, quantity int, amount string) (orderEvents, error) {
	m, err := event.ParseMoney(amount)
	if err != nil {
		return orderEvents{}, fmt.Errorf("amount %q: %w", amount, err)
	}
	return orderEvents{orderID: orderID, sku: sku, quantity: quantity, amount: m}, nil
}

func (o orderEvents) build(t event.Type, version int64, data any) (event.Envelope, error) {
	return event.New(t, event.Meta{AggregateID: o.orderID, AggregateVersion: version, Producer: "drill"}, data)
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
// through the order API and returns its amount.
func (s *session) placeOrder(orderID, sku string, quantity int, unitPrice string) (string, error) {
	var res commandResult
	if err := s.call(Order, "POST", "/orders", map[string]any{"orderId": orderID, "customerId": "C-drill", "currency": "CNY",
		"items": []map[string]any{{"sku": sku, "quantity": quantity, "unitPrice": unitPrice}}}, &res); err != nil {
		return "", err
	}
	if res.BusinessCode != "SUCCESS" {
		return "", fmt.Errorf("create %s: businessCode %s", orderID, res.BusinessCode)
	}
	if err := s.call(Order, "POST", "/orders/"+url.PathEscape(orderID)+"/checkout", nil, &res); err != nil {
		return "", err
	}
	if res.BusinessCode != "SUCCESS" || res.Status != "PENDING_PAYMENT" {
		return "", fmt.Errorf("checkout %s: %s %s", orderID, res.BusinessCode, res.Status)
	}
	return res.Amount, nil
}

// pay pays an order through the payment service.
func (s *session) pay(orderID, amount string) error {
	var res commandResult
	if err := s.call(Payment, "POST", "/payments", map[string]string{"orderId": orderID, "amount": amount, "currency": "CNY"}, &res); err != nil {
		return err
	}
	if res.BusinessCode != "SUCCESS" {
		return fmt.Errorf("pay %s: businessCode %s", orderID, res.BusinessCode)
	}
	return nil
}

func (s *session) order(orderID string) (orderView, error) {
	var o orderView
	err := s.call(Order, "GET", "/orders/"+url.PathEscape(orderID), nil, &o)
	return o, err
}

func (s *session) orderEvents(orderID string) ([]orderEvent, error) {
	var out struct {
		Events []orderEvent `json:"events"`
	}
	err := s.call(Order, "GET", "/orders/"+url.PathEscape(orderID)+"/events", nil, &out)
	return out.Events, err
}

// orderEvent returns the order's only outbox event of type t.
func (s *session) orderEvent(orderID, t string) (orderEvent, error) {
	events, err := s.orderEvents(orderID)
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
		events, err := s.orderEvents(orderID)
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

func (s *session) outboxStatus(eventID string) (outboxStatus, error) {
	var st outboxStatus
	err := s.call(Order, "GET", "/admin/outbox/"+url.PathEscape(eventID), nil, &st)
	return st, err
}

// paidOnce checks the side effects of one payment of quantity × sku
// happened once: stock deducted by quantity from available, one dedup row
// per consumer, one ledger entry and one notification.
func (s *session) paidOnce(orderID, eventID, sku string, available, quantity int) (string, error) {
	st, err := s.stock(sku)
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
