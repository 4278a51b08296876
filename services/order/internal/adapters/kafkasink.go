package adapters

import (
	"context"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"

	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
)

// KafkaSink is the outbox relay's sink to Kafka. It connects lazily, on
// the first batch, and reconnects after a failed one: messaging.NewPublisher
// fails while no broker answers, and a broker outage must only leave rows
// PENDING (the relay backs off and retries) and never stop the service.
type KafkaSink struct {
	brokers []string
	logger  watermill.LoggerAdapter

	mu        sync.Mutex
	publisher *kafka.Publisher
	sink      *outbox.PublisherSink
}

// NewKafkaSink returns a sink that publishes to brokers. It does not
// connect yet.
func NewKafkaSink(brokers []string, logger watermill.LoggerAdapter) *KafkaSink {
	return &KafkaSink{brokers: brokers, logger: logger}
}

// Send publishes msgs in order, connecting first when needed. After a
// failure it drops the publisher, so the next batch starts from a fresh
// connection.
func (s *KafkaSink) Send(ctx context.Context, msgs []outbox.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.publisher == nil {
		pub, err := messaging.NewPublisher(s.brokers, s.logger)
		if err != nil {
			return 0, fmt.Errorf("connect to kafka %v: %w", s.brokers, err)
		}
		s.publisher = pub
		s.sink = outbox.NewPublisherSink(pub)
	}
	sent, err := s.sink.Send(ctx, msgs)
	if err != nil {
		// The publisher may be wedged on a dead connection; its close
		// error adds nothing to the publish error being returned.
		_ = s.closeLocked()
	}
	return sent, err
}

// Close closes the publisher, if one is open.
func (s *KafkaSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeLocked()
}

func (s *KafkaSink) closeLocked() error {
	if s.publisher == nil {
		return nil
	}
	err := s.publisher.Close()
	s.publisher, s.sink = nil, nil
	if err != nil {
		return fmt.Errorf("close kafka publisher: %w", err)
	}
	return nil
}
