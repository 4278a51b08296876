package consumer_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// memoryRecorder keeps dead letters in memory.
type memoryRecorder struct {
	mu      sync.Mutex
	records []dlq.Record
}

func (m *memoryRecorder) Add(_ context.Context, r dlq.Record) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records = append(m.records, r)
	return int64(len(m.records)), nil
}

func (m *memoryRecorder) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.records)
}

// seen counts the events handled, by eventId.
type seen struct {
	mu     sync.Mutex
	events map[string]int
}

func (s *seen) handle(_ context.Context, env event.Envelope) (versionguard.Outcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[env.EventID]++
	return versionguard.Applied, nil
}

func (s *seen) count(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.events[id]
}

// TestRunConsumerWaitsForTheBroker starts the consumer while no broker
// listens: it keeps retrying, without piling up goroutines, consumes once a
// broker is up, dead-letters through its lazy publisher and returns nil
// when its context ends.
func TestRunConsumerWaitsForTheBroker(t *testing.T) {
	addr := servicetest.FreeAddr(t)
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	logs := &servicetest.LogBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	pub := messaging.NewLazyPublisher([]string{addr}, watermill.NopLogger{})
	defer pub.Close()
	recorder := &memoryRecorder{}
	handled := &seen{events: map[string]int{}}
	rt := consumer.Runtime{
		Brokers: []string{addr},
		Group:   "runner-test",
		Config: consumer.Config{Consumer: "runner-test", Topic: topic, DLQTopic: dlqTopic,
			Retry: consumer.RetryConfig{MaxAttempts: 2, InitialInterval: 5 * time.Millisecond, MaxInterval: 10 * time.Millisecond}},
		DLQ:       pub,
		Recorder:  recorder,
		Logger:    logger,
		Handle:    handled.handle,
		Reconnect: consumer.ReconnectConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, rt) }()

	// Each attempt has goroutines of its own while it runs, so compare the
	// fewest seen over a few attempts early on and eight attempts later.
	fewest := func(from, to int) int {
		low := math.MaxInt
		poll.Until(t, 30*time.Second, fmt.Sprintf("%d reconnect warnings", to), func() bool {
			n := strings.Count(logs.String(), consumer.ReconnectWarning)
			if n >= from {
				low = min(low, runtime.NumGoroutine())
			}
			return n >= to
		})
		return low
	}
	before := fewest(2, 4)
	if grown := fewest(12, 14) - before; grown > 2 {
		t.Errorf("%d more goroutines after eight more failed attempts: failed attempts leak", grown)
	}

	b, err := broker.Start(broker.Config{Addr: addr, Partitions: 2, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close() // after the consumer stopped
	env := orderPaid(t, "O-LATE")
	raw, err := env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: topic, Key: []byte("O-LATE"), Value: raw},
		&kgo.Record{Topic: topic, Key: []byte("O-BAD"), Value: []byte(`{"eventId":`)},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the event consumed once the broker is up", func() bool { return handled.count(env.EventID) == 1 })
	poll.Until(t, 10*time.Second, "the poison message dead-lettered", func() bool { return recorder.len() == 1 })
	if got := servicetest.Consume(t, []string{addr}, dlqTopic, 1); string(got[0].Key) != "O-BAD" {
		t.Errorf("DLQ record key %q, want O-BAD", got[0].Key)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v after its context ended, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if n := handled.count(env.EventID); n != 1 {
		t.Errorf("event handled %d times, want once", n)
	}
}

// TestRunConsumerReturnsConfigurationErrors needs no broker: an unusable
// configuration is not worth a reconnect.
func TestRunConsumerReturnsConfigurationErrors(t *testing.T) {
	rt := consumer.Runtime{
		Brokers:  []string{servicetest.FreeAddr(t)},
		Group:    "g",
		Config:   consumer.Config{Consumer: "c", Topic: "t", DLQTopic: "t.dlq", Retry: consumer.RetryConfig{MaxAttempts: 0}},
		DLQ:      messaging.NewLazyPublisher(nil, watermill.NopLogger{}),
		Recorder: &memoryRecorder{},
		Logger:   slog.New(slog.DiscardHandler),
		Handle:   (&seen{}).handle,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := consumer.Run(ctx, rt)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "retry max attempts") {
		t.Fatalf("Run = %v, want the retry configuration error at once", err)
	}
}

// TestRunSkipsEventTypesItDoesNotHandle: with Handles set, a message whose
// eventType header names a type the consumer does not handle never reaches
// Handle, not even a malformed one (no dead letter), is counted as
// consumed and NOT_HANDLED, and its offset is committed; a message without
// the header still goes to Handle, which decides from the payload, and so
// does one whose header names no order event: malformed, it is
// dead-lettered.
func TestRunSkipsEventTypesItDoesNotHandle(t *testing.T) {
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub := messaging.NewLazyPublisher(b.Addrs(), watermill.NopLogger{})
	defer pub.Close()
	recorder := &memoryRecorder{}
	handled := &seen{events: map[string]int{}}
	reg := prometheus.NewRegistry()
	rt := consumer.Runtime{
		Brokers: b.Addrs(),
		Group:   "skip-test",
		Config: consumer.Config{Consumer: "skip-test", Topic: topic, DLQTopic: dlqTopic,
			Retry: consumer.RetryConfig{MaxAttempts: 2, InitialInterval: 5 * time.Millisecond, MaxInterval: 10 * time.Millisecond}},
		DLQ: pub, Recorder: recorder, Metrics: consumer.NewMetrics(reg), Logger: slog.New(slog.DiscardHandler),
		Handle:  handled.handle,
		Handles: func(t event.Type) bool { return t == event.OrderPaid },
	}
	paid, unlabelled := orderPaid(t, "O-1"), orderPaid(t, "O-2")
	var values [2][]byte
	for i, env := range []event.Envelope{paid, unlabelled} {
		if values[i], err = env.Marshal(); err != nil {
			t.Fatal(err)
		}
	}
	typed := func(et event.Type) []kgo.RecordHeader {
		return []kgo.RecordHeader{{Key: event.HeaderEventType, Value: []byte(et)}}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: topic, Key: []byte("O-0"), Value: []byte(`{"eventId":`), Headers: typed(event.OrderCreated)},
		&kgo.Record{Topic: topic, Key: []byte("O-1"), Value: values[0], Headers: typed(event.OrderPaid)},
		&kgo.Record{Topic: topic, Key: []byte("O-2"), Value: values[1]},
		&kgo.Record{Topic: topic, Key: []byte("O-3"), Value: []byte(`{"eventId":`), Headers: typed("Bogus")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx, rt) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	poll.Until(t, 30*time.Second, "three messages consumed and one dead-lettered", func() bool {
		return labelled(t, reg, "consumer_messages_total", "outcome", "ok") == 3 && recorder.len() == 1
	})
	if n, m := handled.count(paid.EventID), handled.count(unlabelled.EventID); n != 1 || m != 1 {
		t.Errorf("handled the OrderPaid %d and the message without an eventType header %d times, want once each", n, m)
	}
	if got := labelled(t, reg, "consumer_event_outcomes_total", "outcome", "NOT_HANDLED"); got != 1 {
		t.Errorf("NOT_HANDLED counted %v times, want 1 (the OrderCreated)", got)
	}
	if got := servicetest.Consume(t, b.Addrs(), dlqTopic, 1); string(got[0].Key) != "O-3" {
		t.Errorf("dead letter %q, want O-3's (the malformed OrderCreated is not this consumer's business)", got[0].Key)
	}
	poll.Until(t, 10*time.Second, "the offsets committed past all four", func() bool {
		offsets, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "skip-test")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offsets.Lookup(topic, 0)
		return ok && o.At == 4
	})
}
