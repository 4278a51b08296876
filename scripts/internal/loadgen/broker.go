package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// deliveryTimeout bounds how long one record may wait for the broker's
// acknowledgement, retries included: a broker that is down fails the run
// instead of hanging it.
const deliveryTimeout = 30 * time.Second

// headersPerRecord is how many headers suiteapi.Record gives a record.
const headersPerRecord = 5

// brokerPublisher produces OrderPaid events with franz-go. Its default
// partitioner hashes keys with Kafka's murmur2, as the services' publisher
// does, so an order's events share a partition whoever publishes them.
type brokerPublisher struct {
	cfg  Config
	cl   *kgo.Client
	paid *paidTemplate // nil in a mixed run
}

func newBrokerPublisher(cfg Config) (*brokerPublisher, error) {
	p := &brokerPublisher{cfg: cfg}
	if !cfg.Mix {
		t, err := newPaidTemplate(cfg.RunID, cfg.SKUs)
		if err != nil {
			return nil, err
		}
		p.paid = t
	}
	// The client stays idempotent, so a retried request can neither
	// duplicate nor reorder an order's events; that already lets it keep
	// five produce requests in flight per broker, and
	// MaxProduceRequestsInflightPerBroker only applies without it.
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("publish-orders"),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordDeliveryTimeout(deliveryTimeout),
		kgo.ProducerLinger(5*time.Millisecond),
		// Every batch the workers have handed over fits, so Produce never
		// blocks on a full buffer while requests are in flight.
		kgo.MaxBufferedRecords(max(10_000, 2*cfg.Concurrency*cfg.Batch)),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	p.cl = cl
	return p, nil
}

func (p *brokerPublisher) close() { p.cl.Close() }

// publish produces the events of orders first … last and waits for every
// acknowledgement; fail is called, on this goroutine, once for each order
// of which the broker did not take an event. The records are produced
// without waiting for one another, so the client packs them, with the
// other workers' batches, into the requests it keeps in flight.
func (p *brokerPublisher) publish(ctx context.Context, first, last int, fail func(int, error)) error {
	recs, orders, err := p.records(first, last, time.Now())
	if err != nil {
		return err // a bug in the generator: no event would be valid
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed map[*kgo.Record]error
	)
	promise := func(r *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if failed == nil {
				failed = map[*kgo.Record]error{}
			}
			failed[r] = err
			mu.Unlock()
		}
		wg.Done()
	}
	wg.Add(len(recs))
	for j := range recs {
		p.cl.Produce(ctx, &recs[j], promise)
	}
	wg.Wait()
	if len(failed) == 0 {
		return nil
	}
	reported := map[int]bool{}
	for j := range recs {
		order := first + j
		if orders != nil {
			order = orders[j]
		}
		if err, ok := failed[&recs[j]]; ok && !reported[order] {
			reported[order] = true
			fail(order, err)
		}
	}
	return nil
}

// records are the records of orders first … last, occurred at now, and
// the order of each when it is not first plus its position (a mixed run).
func (p *brokerPublisher) records(first, last int, now time.Time) ([]kgo.Record, []int, error) {
	n := last - first + 1
	if p.paid != nil {
		recs := make([]kgo.Record, n)
		headers := make([]kgo.RecordHeader, n*headersPerRecord)
		stamp := appendStamp(nil, now)
		// The last order's record is as long as any of the batch's but
		// for its SKU's digits: one allocation holds the batch's bytes.
		var scratch kgo.Record
		size := len(p.paid.record(&scratch, nil, nil, last, stamp)) + 8
		arena := make([]byte, 0, size*n)
		for j := range recs {
			h := headers[j*headersPerRecord : j*headersPerRecord : (j+1)*headersPerRecord]
			arena = p.paid.record(&recs[j], h, arena, first+j, stamp)
		}
		return recs, nil, nil
	}
	recs := make([]kgo.Record, 0, n)
	orders := make([]int, 0, n)
	for i := first; i <= last; i++ {
		events, err := MixedEvents(p.cfg.RunID, i, p.cfg.SKUs, now)
		if err != nil {
			return nil, nil, err
		}
		for _, env := range events {
			rec, err := suiteapi.Record(p.cfg.Topic, env)
			if err != nil {
				return nil, nil, err
			}
			recs = append(recs, *rec)
			orders = append(orders, i)
		}
	}
	return recs, orders, nil
}
