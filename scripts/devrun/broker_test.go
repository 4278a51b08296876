package devrun_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func TestStartBrokerSeedsTheSuiteTopics(t *testing.T) {
	b, err := devrun.StartBroker("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range []string{suite.OrderEventsTopic, suite.DLQTopic} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 {
		t.Fatalf("metadata has %d topics, want 2", len(resp.Topics))
	}
	for _, topic := range resp.Topics {
		if topic.ErrorCode != 0 || len(topic.Partitions) != suite.Partitions {
			t.Errorf("topic %s: error %d, %d partitions, want %d", *topic.Topic, topic.ErrorCode, len(topic.Partitions), suite.Partitions)
		}
	}

	rec := &kgo.Record{Topic: suite.OrderEventsTopic, Key: []byte("O-1001"), Value: []byte(`{"eventId":"E-1"}`)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", suite.OrderEventsTopic, err)
	}
}

func TestStartBrokerExplainsATakenPort(t *testing.T) {
	t.Parallel()
	first, err := devrun.StartBroker("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := devrun.StartBroker(first.Addrs()[0], t.TempDir())
	if err == nil {
		second.Close()
		t.Fatal("two brokers started on one port")
	}
	if !strings.Contains(err.Error(), "KAFKA_BROKERS") {
		t.Errorf("error does not say how to use another broker: %v", err)
	}
}
