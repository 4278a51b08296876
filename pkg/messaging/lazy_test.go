package messaging_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/poll"
	"github.com/reliable-orders/fulfillment/pkg/postgres/postgrestest"
)

// freeAddr returns a local address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func keyed(key, value string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(value))
	msg.Metadata.Set(outbox.HeaderAggregateID, key)
	return msg
}

// consumeN reads n records of topic from its start.
func consumeN(t *testing.T, addrs []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	if len(out) != n {
		t.Fatalf("consumed %d records of %s, want %d", len(out), topic, n)
	}
	return out
}

// TestLazyPublisherConnectsOnceBrokerIsUp publishes while no broker
// listens (it fails, and nothing else breaks), then through the same
// publisher once a broker has started on that address.
func TestLazyPublisherConnectsOnceBrokerIsUp(t *testing.T) {
	addr := freeAddr(t)
	topic := postgrestest.UniqueName("lazy")
	pub := messaging.NewLazyPublisher([]string{addr}, watermill.NopLogger{})
	defer pub.Close()

	if err := pub.Publish(topic, keyed("O-1", "before")); err == nil {
		t.Fatal("Publish succeeded while no broker listens")
	}

	b, err := broker.Start(broker.Config{Addr: addr, Partitions: 2, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	poll.Until(t, 20*time.Second, "a publish once the broker is up", func() bool {
		return pub.Publish(topic, keyed("O-1", "after")) == nil
	})

	records := consumeN(t, b.Addrs(), topic, 1)
	if string(records[0].Key) != "O-1" || string(records[0].Value) != "after" {
		t.Fatalf("record %q=%q, want O-1=after", records[0].Key, records[0].Value)
	}

	if err := pub.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := pub.Publish(topic, keyed("O-1", "closed")); !errors.Is(err, messaging.ErrPublisherClosed) {
		t.Fatalf("Publish after Close = %v, want ErrPublisherClosed", err)
	}
}
