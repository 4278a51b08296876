package outbox

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
)

// PublisherSink delivers rows through a Watermill publisher (the Kafka
// publisher of pkg/messaging). The publisher must be synchronous and keep
// per-key order, as pkg/messaging's is (idempotent, one request in flight).
type PublisherSink struct {
	publisher message.Publisher
}

// NewPublisherSink returns a sink over publisher.
func NewPublisherSink(publisher message.Publisher) *PublisherSink {
	return &PublisherSink{publisher: publisher}
}

// Send publishes msgs topic by topic, in order, all or nothing per topic run.
func (s *PublisherSink) Send(_ context.Context, msgs []Message) (int, error) {
	sent := 0
	for sent < len(msgs) {
		topic := msgs[sent].Topic
		end := sent
		var batch []*message.Message
		for end < len(msgs) && msgs[end].Topic == topic {
			m := msgs[end]
			wm := message.NewMessage(m.EventID, m.Payload)
			for k, v := range m.Headers {
				wm.Metadata.Set(k, v)
			}
			batch = append(batch, wm)
			end++
		}
		if err := s.publisher.Publish(topic, batch...); err != nil {
			return sent, fmt.Errorf("publish to %s: %w", topic, err)
		}
		sent = end
	}
	return sent, nil
}
