// Package messaging connects Watermill to the Kafka-API broker the same way
// in every service and tool: one Sarama configuration, one partition-key
// rule (the aggregateId header, hashed as Kafka's Java client does), a
// batching publisher and a lazy one that outlives broker outages. What a
// consumer does with the messages is package consumer's.
package messaging

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// saramaVersion is the protocol version spoken to Redpanda and kfake.
var saramaVersion = sarama.V3_0_0_0

// Partitions is the partition count of the suite's topics: enough for six
// instances of a consumer to hold several partitions each. Their events in
// flight are the partitions times the subscriber's window
// (docs/decisions.md, In-flight window).
const Partitions = 64

// marshaler keys every message by its aggregateId header, so all events of
// one order land on one partition, in order.
func marshaler() kafka.MarshalerUnmarshaler {
	return kafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
		return msg.Metadata.Get(event.HeaderAggregateID), nil
	})
}

// Publisher sends messages to Kafka with Watermill's marshaling and one
// produce call per Publish. Watermill's kafka.Publisher sends each message
// with a synchronous round trip of its own, which caps the outbox relay at a
// few thousand events per second; this hands the whole slice to Sarama's
// SendMessages instead. Per-key order holds: the producer is idempotent with
// one request in flight.
type Publisher struct {
	producer  sarama.SyncProducer
	marshaler kafka.Marshaler
	closeOnce sync.Once
	closeErr  error
}

// NewPublisher returns a synchronous publisher that keeps per-key order:
// idempotent, all in-sync replicas acknowledge, one request in flight.
func NewPublisher(brokers []string, _ watermill.LoggerAdapter) (*Publisher, error) {
	cfg := kafka.DefaultSaramaSyncPublisherConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "fulfillment"
	cfg.Producer.Partitioner = murmur2Partitioner()
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Retry.Max = 3
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Timeout = 5 * time.Second
	cfg.Metadata.Retry.Max = 2
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Net.DialTimeout = 3 * time.Second
	producer, err := sarama.NewSyncProducer(brokers, cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka producer: %w", err)
	}
	return &Publisher{producer: producer, marshaler: marshaler()}, nil
}

// Publish sends msgs to topic in one produce call and returns when every
// one is acknowledged, or the first error.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	batch := make([]*sarama.ProducerMessage, len(msgs))
	for i, m := range msgs {
		km, err := p.marshaler.Marshal(topic, m)
		if err != nil {
			return fmt.Errorf("marshal message %s: %w", m.UUID, err)
		}
		batch[i] = km
	}
	if err := p.producer.SendMessages(batch); err != nil {
		return fmt.Errorf("produce %d messages to %s: %w", len(batch), topic, err)
	}
	return nil
}

// Close flushes and closes the producer. Closing again returns the first
// Close's result: Sarama's producer panics on a second Close, and
// Watermill's router and a service's shutdown may both close a publisher.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.producer.Close() })
	return p.closeErr
}

// Probe reports whether one of brokers answers a metadata request: the
// first thing a subscription does, here without Watermill around it.
func Probe(brokers []string) error {
	cfg := sarama.NewConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = "fulfillment-probe"
	cfg.Metadata.Retry.Max = 1
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	cfg.Net.DialTimeout = 3 * time.Second
	client, err := sarama.NewClient(brokers, cfg)
	if err != nil {
		return fmt.Errorf("connect to kafka %v: %w", brokers, err)
	}
	return client.Close()
}

// WatermillLogger adapts logger for Watermill, whose Info lines (one per
// subscription step and handler start) are logged at Debug.
func WatermillLogger(logger *slog.Logger) watermill.LoggerAdapter {
	return watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{slog.LevelInfo: slog.LevelDebug})
}
