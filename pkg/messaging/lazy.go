package messaging

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
)

// ErrPublisherClosed is returned by Publish after Close.
var ErrPublisherClosed = errors.New("publisher closed")

// LazyPublisher is a message.Publisher over NewPublisher's Kafka publisher
// that connects on first use and again after a failed Publish.
//
// NewPublisher fails while no broker answers, so a service that created its
// publisher at start could not start during a broker outage. A broker outage
// must only delay what is published (the outbox keeps rows PENDING, a dead
// letter stays unacknowledged) and never stop a service; and a publisher
// whose connection died is better replaced than retried.
//
// It is safe for concurrent use; Publish calls are serialised, which also
// keeps the per-key order of one caller's messages.
type LazyPublisher struct {
	brokers []string
	logger  watermill.LoggerAdapter

	mu        sync.Mutex
	publisher *Publisher
	closed    bool
}

var _ message.Publisher = (*LazyPublisher)(nil)

// NewLazyPublisher returns a publisher to brokers. It does not connect yet.
func NewLazyPublisher(brokers []string, logger watermill.LoggerAdapter) *LazyPublisher {
	return &LazyPublisher{brokers: brokers, logger: logger}
}

// Publish publishes msgs to topic, connecting first when needed. After a
// failure it drops the publisher, so the next call starts from a fresh
// connection.
func (p *LazyPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if p.publisher == nil {
		pub, err := NewPublisher(p.brokers, p.logger)
		if err != nil {
			return fmt.Errorf("connect to kafka %v: %w", p.brokers, err)
		}
		p.publisher = pub
	}
	if err := p.publisher.Publish(topic, msgs...); err != nil {
		// The publisher may be wedged on a dead connection; its close
		// error adds nothing to the publish error being returned.
		_ = p.closeLocked()
		return err
	}
	return nil
}

// Close closes the publisher, if one is open; later calls to Publish fail.
func (p *LazyPublisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.closeLocked()
}

func (p *LazyPublisher) closeLocked() error {
	if p.publisher == nil {
		return nil
	}
	err := p.publisher.Close()
	p.publisher = nil
	if err != nil {
		return fmt.Errorf("close kafka publisher: %w", err)
	}
	return nil
}
