package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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
// for every acknowledgement; fail is called, on this goroutine, for each
// event the broker did not take.
func (p *brokerPublisher) publish(ctx context.Context, first, last int, fail func(int, error)) error {
	now := time.Now()
	recs := make([]*kgo.Record, 0, last-first+1)
	for i := first; i <= last; i++ {
		env, err := OrderPaid(p.cfg.RunID, i, p.cfg.SKUs, now)
		if err != nil {
			return err // a bug in the generator: no event would be valid
		}
		rec, err := Record(p.cfg.Topic, env)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
	}
	for j, r := range p.cl.ProduceSync(ctx, recs...) {
		if r.Err != nil {
			fail(first+j, r.Err)
		}
	}
	return nil
}
