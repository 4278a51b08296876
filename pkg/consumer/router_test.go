package consumer_test

import (
	"context"
	"errors"
	"io"
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

// flaky fails the first n runs per event with a retryable error and records
// every run and every successful application.
type flaky struct {
	mu      sync.Mutex
	failN   map[string]int
	runs    map[string]int
	applied map[string]int
}

func (f *flaky) handle(_ context.Context, env event.Envelope) (versionguard.Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[env.EventID]++
	if f.runs[env.EventID] <= f.failN[env.AggregateID] {
		return "", errors.New("connection reset by peer")
	}
	f.applied[env.EventID]++
	return versionguard.Applied, nil
}

func (f *flaky) counts(id string) (runs, applied int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id], f.applied[id]
}

func orderPaid(t *testing.T, orderID string) event.Envelope {
	t.Helper()
	amount, _ := event.ParseMoney("10.00")
	env, err := event.New(event.OrderPaid, event.Meta{AggregateID: orderID, AggregateVersion: 3, Producer: "test"},
		event.OrderPaidData{PaymentID: "P", PaidAmount: amount, Currency: "CNY", CustomerID: "C", Items: []event.Item{{SKU: "S", Quantity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func TestRouterRetriesThenDeadLetters(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	store := dlq.NewStore(db)
	h := &flaky{failN: map[string]int{"O-RECOVERS": 2, "O-NEVER": 100}, runs: map[string]int{}, applied: map[string]int{}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	sub, err := messaging.NewSubscriber(messaging.DefaultSubscriberConfig(b.Addrs(), "test-group"), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := messaging.NewPublisher(b.Addrs(), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	cfg := consumer.Config{Consumer: "test-consumer", Topic: topic, DLQTopic: dlqTopic,
		Retry: consumer.RetryConfig{MaxAttempts: 3, InitialInterval: 5 * time.Millisecond, MaxInterval: 20 * time.Millisecond}}
	reg := prometheus.NewRegistry()
	router, err := consumer.NewRouter(cfg, sub, pub, store, consumer.NewMetrics(reg), logger, h.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	}()

	recovers, never := orderPaid(t, "O-RECOVERS"), orderPaid(t, "O-NEVER")
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, env := range []event.Envelope{recovers, never} {
		raw, _ := env.Marshal()
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(env.AggregateID), Value: raw,
			Headers: []kgo.RecordHeader{{Key: "eventId", Value: []byte(env.EventID)}, {Key: "aggregateId", Value: []byte(env.AggregateID)}}})
	}
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("O-BAD"), Value: []byte(`{"eventId":`)})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// A dead letter is counted after it is recorded and published.
	poll.Until(t, 20*time.Second, "two dead letters counted and one recovery", func() bool {
		_, applied := h.counts(recovers.EventID)
		return counterSum(t, reg, "consumer_dead_letters_total") == 2 && applied == 1
	})
	if runs, applied := h.counts(recovers.EventID); runs != 3 || applied != 1 {
		t.Errorf("recovering event: %d runs, %d applied; want 3 runs, applied once", runs, applied)
	}
	if runs, applied := h.counts(never.EventID); runs != 3 || applied != 0 {
		t.Errorf("failing event: %d runs, %d applied; want exactly the bound of 3 runs", runs, applied)
	}

	// Two retries of the recovering event, two of the one that never recovers.
	if got := counterSum(t, reg, "consumer_retries_total"); got != 4 {
		t.Errorf("consumer_retries_total = %v, want 4", got)
	}
	if got := counterSum(t, reg, "consumer_dead_letters_total"); got != 2 {
		t.Errorf("consumer_dead_letters_total = %v, want 2", got)
	}

	tests := []struct {
		aggregate string
		class     string
		attempts  int
	}{
		{"O-NEVER", "RETRYABLE", 3},
		{"O-BAD", "PERMANENT", 1},
	}
	for _, tt := range tests {
		got, err := store.List(context.Background(), tt.aggregate)
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: %d records, %v", tt.aggregate, len(got), err)
		}
		r := got[0]
		if r.ErrorClass != tt.class || r.Attempts != tt.attempts || r.OriginalTopic != topic ||
			r.Consumer != "test-consumer" || r.FirstFailedAt.IsZero() || r.FailureReason == "" || len(r.Value) == 0 {
			t.Errorf("%s: record %+v", tt.aggregate, r)
		}
	}

	dl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(dlqTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	var dead []*kgo.Record
	pollCtx, pollCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pollCancel()
	for len(dead) < 2 && pollCtx.Err() == nil {
		dead = append(dead, dl.PollFetches(pollCtx).Records()...)
	}
	if len(dead) != 2 {
		t.Fatalf("DLQ topic holds %d records, want 2", len(dead))
	}
	for _, r := range dead {
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		for _, k := range []string{"originalTopic", "failureReason", "errorClass", "attempts", "firstFailedAt", "consumer"} {
			if headers[k] == "" {
				t.Errorf("DLQ record for key %s lacks %s", r.Key, k)
			}
		}
		if string(r.Key) != "O-NEVER" && string(r.Key) != "O-BAD" {
			t.Errorf("DLQ record key %q, want the original key", r.Key)
		}
	}
}

func TestClassify(t *testing.T) {
	_, invalid := event.Parse([]byte("{"))
	tests := []struct {
		name string
		err  error
		want consumer.Class
	}{
		{"invalid event", invalid, consumer.Permanent},
		{"marked permanent", consumer.PermanentError("X", errors.New("x")), consumer.Permanent},
		{"business rejection", consumer.Rejection("INSUFFICIENT_STOCK", errors.New("x")), consumer.BusinessRejection},
		{"anything else", errors.New("timeout"), consumer.Retryable},
	}
	for _, tt := range tests {
		if got, _ := consumer.Classify(tt.err); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
