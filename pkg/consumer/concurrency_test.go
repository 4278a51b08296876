package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// routerFixture is one router on a fresh broker and topics, dead-lettering
// into memory.
type routerFixture struct {
	topic, dlqTopic string
	partitions      int32
	brokers         []string
	recorder        *stampedRecorder
	reg             *prometheus.Registry
	producer        *kgo.Client
}

// stampedRecorder keeps dead letters in memory with the time each was
// recorded.
type stampedRecorder struct {
	mu      sync.Mutex
	records []dlq.Record
	at      []time.Time
}

func (r *stampedRecorder) Add(_ context.Context, rec dlq.Record) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	r.at = append(r.at, time.Now())
	return int64(len(r.records)), nil
}

// find returns the dead letters of aggregateID and when they were recorded.
func (r *stampedRecorder) find(aggregateID string) ([]dlq.Record, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var recs []dlq.Record
	var at []time.Time
	for i, rec := range r.records {
		if rec.AggregateID == aggregateID {
			recs, at = append(recs, rec), append(at, r.at[i])
		}
	}
	return recs, at
}

func (r *stampedRecorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.records)
}

// startRouter runs a router over a new topic of the given partitions until
// the test ends.
func startRouter(t *testing.T, partitions int32, retry consumer.RetryConfig, handle consumer.EventHandler) *routerFixture {
	t.Helper()
	f := &routerFixture{
		topic:      postgrestest.UniqueName("events"),
		dlqTopic:   postgrestest.UniqueName("dlq"),
		partitions: partitions,
		recorder:   &stampedRecorder{},
		reg:        prometheus.NewRegistry(),
	}
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: partitions, Topics: []string{f.topic, f.dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	f.brokers = b.Addrs()
	sub, err := messaging.NewSubscriber(messaging.DefaultSubscriberConfig(f.brokers, postgrestest.UniqueName("group")), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := messaging.NewPublisher(f.brokers, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cfg := consumer.Config{Consumer: "test-consumer", Topic: f.topic, DLQTopic: f.dlqTopic, Retry: retry}
	router, err := consumer.NewRouter(cfg, sub, pub, f.recorder, consumer.NewMetrics(f.reg), slog.New(slog.DiscardHandler), handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	f.producer, err = kgo.NewClient(kgo.SeedBrokers(f.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.producer.Close)
	return f
}

// publish appends the envelopes to the topic in order, keyed by their
// aggregate, with the relay's headers.
func (f *routerFixture) publish(t *testing.T, envs ...event.Envelope) {
	t.Helper()
	var recs []*kgo.Record
	for _, env := range envs {
		raw, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: f.topic, Key: []byte(env.AggregateID), Value: raw,
			Headers: []kgo.RecordHeader{{Key: "eventId", Value: []byte(env.EventID)}, {Key: "aggregateId", Value: []byte(env.AggregateID)}}})
	}
	f.publishRecords(t, recs...)
}

func (f *routerFixture) publishRecords(t *testing.T, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// keysOn returns n keys with prefix that land on partition p of f's topic.
func (f *routerFixture) keysOn(t *testing.T, prefix string, p int32, n int) []string {
	t.Helper()
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("%s-%d", prefix, i)
		got, err := messaging.KeyPartition(k, f.partitions)
		if err != nil {
			t.Fatal(err)
		}
		if got == p {
			keys = append(keys, k)
		}
	}
	return keys
}

func paidAt(t *testing.T, orderID string, version int64) event.Envelope {
	t.Helper()
	env := orderPaid(t, orderID)
	env.AggregateVersion = version
	return env
}

// inFlight tracks how many events are being handled at once, per order and
// overall, and the order in which each order's versions were handled.
type inFlight struct {
	mu                  sync.Mutex
	perKey              map[string]int
	total               int
	maxPerKey, maxTotal int
	handled             map[string][]int64
	count               int
}

func (f *inFlight) handle(ctx context.Context, env event.Envelope) (versionguard.Outcome, error) {
	f.mu.Lock()
	f.perKey[env.AggregateID]++
	f.total++
	f.maxPerKey = max(f.maxPerKey, f.perKey[env.AggregateID])
	f.maxTotal = max(f.maxTotal, f.total)
	f.mu.Unlock()

	// The handler's work: long enough for a second event of the same order
	// to be handed over meanwhile if the router did so.
	select {
	case <-ctx.Done():
	case <-time.After(15 * time.Millisecond):
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	f.perKey[env.AggregateID]--
	f.total--
	f.handled[env.AggregateID] = append(f.handled[env.AggregateID], env.AggregateVersion)
	f.count++
	return versionguard.Applied, nil
}

func (f *inFlight) done() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// docs/design.md, Consumers and partitions: an order's events are handled
// one at a time, in order (they share a partition); different orders'
// events are handled in parallel, also several of one partition at once
// (the subscriber's window).
func TestRouterHandlesAnOrderAtATimeAndOrdersInParallel(t *testing.T) {
	const partitions, keysPerPartition, versions = 4, 2, 5
	h := &inFlight{perKey: map[string]int{}, handled: map[string][]int64{}}
	f := startRouter(t, partitions, consumer.DefaultRetryConfig(), h.handle)

	var keys []string
	for p := range int32(partitions) {
		keys = append(keys, f.keysOn(t, "O-PAR", p, keysPerPartition)...)
	}
	// Interleaved, so every partition has work from the start.
	var envs []event.Envelope
	for v := int64(1); v <= versions; v++ {
		for _, k := range keys {
			envs = append(envs, paidAt(t, k, v))
		}
	}
	f.publish(t, envs...)
	poll.Until(t, 30*time.Second, "every event handled", func() bool { return h.done() == len(envs) })

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.maxPerKey != 1 {
		t.Errorf("up to %d events of one order handled at once, want 1", h.maxPerKey)
	}
	if h.maxTotal <= partitions {
		t.Errorf("at most %d events handled at once over %d partitions, want several orders of a partition in parallel", h.maxTotal, partitions)
	}
	for _, k := range keys {
		if got := fmt.Sprint(h.handled[k]); got != "[1 2 3 4 5]" {
			t.Errorf("order %s handled versions %s, want [1 2 3 4 5] once each, in order", k, got)
		}
	}
	t.Logf("at most %d events in flight at once", h.maxTotal)
}

// poisonVictim fails one event forever (retryably) and records when every
// other event was applied.
type poisonVictim struct {
	mu        sync.Mutex
	poison    string
	poisonRun []time.Time
	applied   map[string][]time.Time
}

func (p *poisonVictim) handle(_ context.Context, env event.Envelope) (versionguard.Outcome, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if env.EventID == p.poison {
		p.poisonRun = append(p.poisonRun, time.Now())
		return "", errors.New("connection reset by peer")
	}
	p.applied[env.EventID] = append(p.applied[env.EventID], time.Now())
	return versionguard.Applied, nil
}

// docs/design.md, Retry and backoff: a bad message holds its order no
// longer than the retry bound, and no other order at all. An event that
// fails retryably forever is followed, on its partition, by its own
// order's next event and by another order's event: the other order's is
// applied while the poison is still retried, its own order's once, right
// after the poison is dead-lettered, within the bound plus slack.
func TestPoisonMessageHoldsOnlyItsOrderForTheRetryBound(t *testing.T) {
	const partitions = 4
	retry := consumer.RetryConfig{MaxAttempts: 4, InitialInterval: 50 * time.Millisecond, MaxInterval: 400 * time.Millisecond}
	h := &poisonVictim{applied: map[string][]time.Time{}}
	f := startRouter(t, partitions, retry, h.handle)
	keys := f.keysOn(t, "O-POISON", 2, 2)
	poison, next, other := paidAt(t, keys[0], 3), paidAt(t, keys[0], 4), paidAt(t, keys[1], 3)
	h.mu.Lock()
	h.poison = poison.EventID
	h.mu.Unlock()

	f.publish(t, poison, next, other)
	poll.Until(t, 30*time.Second, "the poison's order's next event applied", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.applied[next.EventID]) > 0
	})

	// The waits between attempts: doubling from the initial interval,
	// capped, with up to +50 % jitter.
	var bound time.Duration
	for a := 1; a < retry.MaxAttempts; a++ {
		bound += min(retry.InitialInterval<<(a-1), retry.MaxInterval) * 3 / 2
	}
	const slack = time.Second // the broker and the DLQ publish

	recs, deadAt := f.recorder.find(keys[0])
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(recs) != 1 || recs[0].ErrorClass != string(consumer.Retryable) || recs[0].Attempts != retry.MaxAttempts ||
		recs[0].OriginalPartition != 2 || recs[0].EventID != poison.EventID {
		t.Fatalf("poison dead letters %+v, want one RETRYABLE record after %d attempts from partition 2", recs, retry.MaxAttempts)
	}
	if len(h.poisonRun) != retry.MaxAttempts {
		t.Errorf("poison handled %d times, want the bound of %d", len(h.poisonRun), retry.MaxAttempts)
	}
	for _, e := range []event.Envelope{next, other} {
		if n := len(h.applied[e.EventID]); n != 1 {
			t.Errorf("event of %s applied %d times, want once", e.AggregateID, n)
		}
	}
	if nextAt := h.applied[next.EventID][0]; nextAt.Before(deadAt[0]) {
		t.Errorf("the poison's order's next event was applied before the poison was dead-lettered")
	} else if held := nextAt.Sub(h.poisonRun[0]); held > bound+slack {
		t.Errorf("the poison held its order for %v, more than the retry bound %v + %v", held, bound, slack)
	} else {
		t.Logf("the poison held its order for %v (bound %v)", held, bound)
	}
	if otherAt := h.applied[other.EventID][0]; !otherAt.Before(h.poisonRun[len(h.poisonRun)-1]) {
		t.Errorf("another order's event on the poison's partition waited for the poison's last attempt")
	}
	if n := f.recorder.len(); n != 1 {
		t.Errorf("%d dead letters, want only the poison's", n)
	}
}
