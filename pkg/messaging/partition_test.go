package messaging_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// The services (Sarama via Watermill) and franz-go's default partitioner —
// Kafka's murmur2, as the Java client — must put every key on the same
// partition, or an order's events published by two clients could be
// consumed out of order.
func TestPartitioningMatchesTheJavaClient(t *testing.T) {
	const topic, partitions = "partitioning", 12
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: partitions, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	pub, err := messaging.NewPublisher(b.Addrs(), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	franz, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer franz.Close()

	const keys = 200
	for i := range keys {
		key := fmt.Sprintf("O-%06d", i)
		m := message.NewMessage(watermill.NewUUID(), []byte("sarama"))
		m.Metadata.Set(event.HeaderAggregateID, key)
		if err := pub.Publish(topic, m); err != nil {
			t.Fatal(err)
		}
		if err := franz.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte("franz")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	got := map[string]map[string]int32{"sarama": {}, "franz": {}}
	used := map[int32]bool{}
	for n := 0; n < 2*keys && ctx.Err() == nil; {
		for _, r := range cl.PollFetches(ctx).Records() {
			got[string(r.Value)][string(r.Key)] = r.Partition
			used[r.Partition] = true
			n++
		}
	}
	for i := range keys {
		key := fmt.Sprintf("O-%06d", i)
		s, sok := got["sarama"][key]
		f, fok := got["franz"][key]
		if !sok || !fok || s != f {
			t.Fatalf("key %s: services partition %d (%v), franz-go partition %d (%v)", key, s, sok, f, fok)
		}
		if p, err := messaging.KeyPartition(key, partitions); err != nil || p != s {
			t.Fatalf("KeyPartition(%s) = %d, %v; the publisher used %d", key, p, err, s)
		}
	}
	if len(used) < partitions/2 {
		t.Fatalf("%d keys used only %d of %d partitions", keys, len(used), partitions)
	}
}
