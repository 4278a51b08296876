package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// deliveryTimeout bounds how long one record may wait for the broker's
// acknowledgement, retries included: a broker that is down fails the run
// instead of hanging it.
const deliveryTimeout = 30 * time.Second

// brokerPublisher produces OrderPaid events with franz-go. Its default
// partitioner hashes keys with Kafka's murmur2, as the services' publisher
// does, so an order's events share a partition whoever publishes them.
type brokerPublisher struct {
	cfg Config
	cl  *kgo.Client
}

func newBrokerPublisher(cfg Config) (*brokerPublisher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("publish-orders"),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(max(10_000, 2*cfg.Concurrency*cfg.Batch)),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return &brokerPublisher{cfg: cfg, cl: cl}, nil
}

func (p *brokerPublisher) close() { p.cl.Close() }

// publish produces the events of orders first … last in one call and waits
// for every acknowledgement; fail is called, on this goroutine, once for
// each order of which the broker did not take an event.
func (p *brokerPublisher) publish(ctx context.Context, first, last int, fail func(int, error)) error {
	now := time.Now()
	recs := make([]*kgo.Record, 0, last-first+1)
	var orders []int // the order of each record
	for i := first; i <= last; i++ {
		events, err := p.events(i, now)
		if err != nil {
			return err // a bug in the generator: no event would be valid
		}
		for _, env := range events {
			rec, err := Record(p.cfg.Topic, env)
			if err != nil {
				return err
			}
			recs = append(recs, rec)
			orders = append(orders, i)
		}
	}
	failed := map[int]bool{}
	for j, r := range p.cl.ProduceSync(ctx, recs...) {
		if r.Err != nil && !failed[orders[j]] {
			failed[orders[j]] = true
			fail(orders[j], r.Err)
		}
	}
	return nil
}

// events are the events of order i: its OrderPaid, or with Mix its mixed
// events, copies included.
func (p *brokerPublisher) events(i int, now time.Time) ([]event.Envelope, error) {
	if p.cfg.Mix {
		return MixedEvents(p.cfg.RunID, i, p.cfg.SKUs, now)
	}
	env, err := OrderPaid(p.cfg.RunID, i, p.cfg.SKUs, now)
	if err != nil {
		return nil, err
	}
	return []event.Envelope{env}, nil
}
