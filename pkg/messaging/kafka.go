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

// Partitions is the partition count of the suite's topics. A consumer
// handles one message per partition at a time (it acknowledges after its
// commit), so the partitions are the events a consumer group has in
// flight: 64 gives the batch processor big batches with one instance and
// still several partitions each with six (docs/decisions.md, Batching).
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

// NewSubscriber returns a consumer-group subscriber. A new group starts at
// the oldest offset, so nothing published before its first start is missed;
// an offset is marked only after the handler acknowledged the message, which
// the router does after the handler's transaction committed.
func NewSubscriber(brokers []string, group string, logger watermill.LoggerAdapter) (*kafka.Subscriber, error) {
	cfg := kafka.DefaultSaramaSubscriberConfig()
	cfg.Version = saramaVersion
	cfg.ClientID = group
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 250 * time.Millisecond
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{&lockedStrategy{s: sarama.NewBalanceStrategySticky()}}
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	// A consumer handles one message per partition at a time (it acks after
	// its commit), so deep read-ahead only costs memory: Sarama's defaults
	// (1 MiB per partition per fetch, 256 messages buffered per partition)
	// held well over 100 MiB per process with 64 partitions in a backlog.
	// 64 KiB and 32 messages keep every partition several batches ahead.
	cfg.Consumer.Fetch.Default = 64 << 10
	cfg.ChannelBufferSize = 32
	return kafka.NewSubscriber(kafka.SubscriberConfig{
		Brokers:               brokers,
		Unmarshaler:           marshaler(),
		OverwriteSaramaConfig: cfg,
		ConsumerGroup:         group,
		// Topics are created by the broker's seed (make run, compose); this
		// is what SubscribeInitialize creates where none exist.
		InitializeTopicDetails: &sarama.TopicDetail{NumPartitions: Partitions, ReplicationFactor: 1},
		NackResendSleep:        100 * time.Millisecond,
		ReconnectRetrySleep:    time.Second,
	}, logger)
}

// lockedStrategy serialises a balance strategy's calls. Sarama's sticky
// strategy keeps state between Plan calls, and watermill-kafka opens one
// consumer group per Subscribe over the same configuration, so two groups
// of one subscriber that rebalance at once would plan on it concurrently
// (the race detector sees it in Watermill's universal suite).
type lockedStrategy struct {
	mu sync.Mutex
	s  sarama.BalanceStrategy
}

func (l *lockedStrategy) Name() string { return l.s.Name() }

func (l *lockedStrategy) Plan(members map[string]sarama.ConsumerGroupMemberMetadata, topics map[string][]int32) (sarama.BalanceStrategyPlan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.Plan(members, topics)
}

func (l *lockedStrategy) AssignmentData(memberID string, topics map[string][]int32, generationID int32) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.AssignmentData(memberID, topics, generationID)
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
