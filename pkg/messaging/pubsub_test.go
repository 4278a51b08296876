package messaging_test

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// TestUniversalPubSub runs Watermill's own Pub/Sub test suite against the
// embedded broker with the publisher and subscriber every service uses,
// with their real settings: whatever sits under the routers must keep the
// contract Watermill's middleware relies on (ack, nack and resend, close,
// consumer groups, order per key).
func TestUniversalPubSub(t *testing.T) {
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	logger := watermill.NopLogger{}

	withGroup := func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
		pub, err := messaging.NewPublisher(b.Addrs(), logger)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := messaging.NewSubscriber(messaging.DefaultSubscriberConfig(b.Addrs(), group), logger)
		if err != nil {
			t.Fatal(err)
		}
		return pub, sub
	}
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:      true,
		ExactlyOnceDelivery: false,
		GuaranteedOrder:     true,
		Persistent:          true,
		ForceShort:          true,
	}, func(t *testing.T) (message.Publisher, message.Subscriber) {
		return withGroup(t, "universal")
	}, withGroup)
}
