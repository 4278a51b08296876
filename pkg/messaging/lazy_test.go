package messaging_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

func keyed(key, value string) *message.Message {
	msg := message.NewMessage(watermill.NewUUID(), []byte(value))
	msg.Metadata.Set(event.HeaderAggregateID, key)
	return msg
}

// TestLazyPublisherConnectsOnceBrokerIsUp publishes while no broker
// listens (it fails, and nothing else breaks), then through the same
// publisher once a broker has started on that address.
func TestLazyPublisherConnectsOnceBrokerIsUp(t *testing.T) {
	addr := servicetest.FreeAddr(t)
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

	records := servicetest.Consume(t, b.Addrs(), topic, 1)
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
