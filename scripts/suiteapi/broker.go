package suiteapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/event"
)

// brokerTimeout bounds one Publish, Produce or read of a topic back.
const brokerTimeout = 15 * time.Second

// producer returns the client's Kafka client, connecting on first use.
func (c *Client) producer() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kafka == nil {
		if len(c.cfg.Brokers) == 0 {
			return nil, errors.New("no Kafka brokers configured")
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfg.Brokers...), kgo.ProducerLinger(0))
		if err != nil {
			return nil, fmt.Errorf("kafka client for %v: %w", c.cfg.Brokers, err)
		}
		c.kafka = cl
	}
	return c.kafka, nil
}

// Record is env as the outbox relay publishes it to topic: key =
// aggregateId and the contract's headers.
func Record(topic string, env event.Envelope) (*kgo.Record, error) {
	raw, err := env.Marshal()
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: topic, Key: []byte(env.AggregateID), Value: raw, Headers: []kgo.RecordHeader{
		{Key: event.HeaderEventID, Value: []byte(env.EventID)},
		{Key: event.HeaderEventType, Value: []byte(env.EventType)},
		{Key: event.HeaderEventVersion, Value: []byte(strconv.Itoa(env.EventVersion))},
		{Key: event.HeaderAggregateID, Value: []byte(env.AggregateID)},
		{Key: event.HeaderTraceparent, Value: []byte(env.Traceparent())},
	}}, nil
}

// Publish writes envelopes straight to the order-events topic, as another
// producer, or a duplicate delivery, would.
func (c *Client) Publish(ctx context.Context, envs ...event.Envelope) error {
	recs := make([]*kgo.Record, len(envs))
	for i, env := range envs {
		r, err := Record(c.cfg.Topic, env)
		if err != nil {
			return err
		}
		recs[i] = r
	}
	_, err := c.Produce(ctx, recs...)
	return err
}

// Produce writes records and returns them as the broker placed them, in
// the order the broker acknowledged them (not necessarily recs' order).
func (c *Client) Produce(ctx context.Context, recs ...*kgo.Record) ([]*kgo.Record, error) {
	cl, err := c.producer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("publish to %s: %w", c.cfg.Topic, err)
	}
	out := make([]*kgo.Record, len(res))
	for i, r := range res {
		out[i] = r.Record
	}
	return out, nil
}

// Partitions is the topic's partition count: each partition has one end
// offset.
func (c *Client) Partitions(ctx context.Context) (int, error) {
	ends, err := c.EndOffsets(ctx)
	return len(ends), err
}

// CountSince counts the records on the order-events topic carrying
// eventID from since, an EndOffsets mark (nil: each partition's start), to
// each partition's end at the time of the call: records written meanwhile
// are neither waited for nor counted.
func (c *Client) CountSince(ctx context.Context, since map[int32]int64, eventID string) (int, error) {
	n := 0
	err := c.scan(ctx, c.cfg.Topic, since, func(r *kgo.Record) {
		var head struct {
			EventID string `json:"eventId"`
		}
		if json.Unmarshal(r.Value, &head) == nil && head.EventID == eventID {
			n++
		}
	})
	return n, err
}

// DeadLetterHeaders returns the headers of the records on the dead-letter
// topic, from its start to each partition's end at the time of the call,
// that dead-letter eventID: one for each consumer that dead-lettered it,
// each carrying the metadata of docs/design.md, Dead letters. The event is
// found by its header (consumer.MetaEventID): a dead letter's value may
// not be JSON.
func (c *Client) DeadLetterHeaders(ctx context.Context, eventID string) ([]map[string]string, error) {
	var out []map[string]string
	err := c.scan(ctx, c.cfg.DLQTopic, nil, func(r *kgo.Record) {
		headers := make(map[string]string, len(r.Headers))
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		if headers[consumer.MetaEventID] == eventID {
			out = append(out, headers)
		}
	})
	return out, err
}

// scan hands each record of topic from since (nil: each partition's
// start) to each partition's end at the time of the call to each.
func (c *Client) scan(ctx context.Context, topic string, since map[int32]int64, each func(*kgo.Record)) error {
	ends, err := c.endOffsets(ctx, topic)
	if err != nil {
		return err
	}
	from := map[int32]kgo.Offset{}
	for p, end := range ends {
		if end > since[p] {
			from[p] = kgo.NewOffset().At(since[p])
		} else {
			delete(ends, p)
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.cfg.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}))
	if err != nil {
		return fmt.Errorf("kafka client for %v: %w", c.cfg.Brokers, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, brokerTimeout)
	defer cancel()
	for len(ends) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s back: %w", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, open := ends[r.Partition]
			if !open || r.Offset >= end {
				return
			}
			each(r)
			if r.Offset+1 >= end {
				delete(ends, r.Partition)
			}
		})
	}
	return nil
}

// EndOffsets returns the end offset of every partition of the order-events
// topic: a mark to count the records written after it.
func (c *Client) EndOffsets(ctx context.Context) (map[int32]int64, error) {
	return c.endOffsets(ctx, c.cfg.Topic)
}

func (c *Client) endOffsets(ctx context.Context, topic string) (map[int32]int64, error) {
	cl, err := c.producer()
	if err != nil {
		return nil, err
	}
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	if len(ends) == 0 {
		return nil, fmt.Errorf("end offsets of %s: no partitions", topic)
	}
	return ends, nil
}
