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
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// refusingPublisher refuses its first n publishes, as a DLQ topic whose
// broker is down for a while.
type refusingPublisher struct {
	message.Publisher
	mu       sync.Mutex
	n, tries int
}

func (p *refusingPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	p.tries++
	refuse := p.tries <= p.n
	p.mu.Unlock()
	if refuse {
		return errors.New("dlq broker unavailable")
	}
	return p.Publisher.Publish(topic, msgs...)
}

func (p *refusingPublisher) attempts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tries
}

// A dead letter whose DLQ publish fails is delivered again, fails its
// retries again and is dead-lettered again: each cycle adds its attempts to
// one row instead of adding a row.
func TestFailingDLQPublishKeepsOneRowCountingAttempts(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, dlq.Schema())
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	store := dlq.NewStore(db)
	h := &flaky{failN: map[string]int{"O-NEVER": 1000}, runs: map[string]int{}, applied: map[string]int{}}
	sub, err := messaging.NewSubscriber(messaging.DefaultSubscriberConfig(b.Addrs(), "test-group"), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := messaging.NewPublisher(b.Addrs(), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const refused, retries = 3, 2
	dlqPub := &refusingPublisher{Publisher: pub, n: refused}
	cfg := consumer.Config{Consumer: "test-consumer", Topic: topic, DLQTopic: dlqTopic,
		Retry: consumer.RetryConfig{MaxAttempts: retries, InitialInterval: 5 * time.Millisecond, MaxInterval: 10 * time.Millisecond}}
	router, err := consumer.NewRouter(cfg, sub, dlqPub, store, consumer.NewMetrics(prometheus.NewRegistry()),
		slog.New(slog.NewTextHandler(io.Discard, nil)), h.handle)
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

	env := orderPaid(t, "O-NEVER")
	raw, _ := env.Marshal()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(env.AggregateID), Value: raw,
		Headers: []kgo.RecordHeader{{Key: event.HeaderEventID, Value: []byte(env.EventID)}}}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the DLQ publish succeeds after its refusals", func() bool { return dlqPub.attempts() > refused })
	recs, err := store.List(context.Background(), "O-NEVER")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d dead letter rows after %d failed DLQ publishes, want 1", len(recs), refused)
	}
	if want := retries * (refused + 1); recs[0].Attempts != want {
		t.Fatalf("row counts %d attempts, want %d (%d cycles of %d)", recs[0].Attempts, want, refused+1, retries)
	}
}
