package inbox

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// BatchConfig tunes a BatchProcessor.
type BatchConfig struct {
	// MaxBatch bounds the events of one transaction; 1 turns batching off
	// (one transaction per event, the baseline).
	MaxBatch int
	// Linger is how long a batch waits for more events after its first one
	// when fewer than MaxBatch are ready: the acks of one batch release the
	// next messages of their partitions a moment later, and waiting for them
	// is what makes the next batch big.
	Linger time.Duration
	// Workers is how many batches may be in their transactions at once;
	// 0 means 1. While one batch waits for its commit, the events that
	// arrived meanwhile go into the next without waiting their turn. Two
	// batches never hold events of one aggregate (the subscriber never has
	// two messages of one key in flight); rows they share are the
	// consumer's to lock in one order.
	Workers int
}

// DefaultBatchConfig batches up to 256 events, lingering 2 ms, two batches
// at a time.
func DefaultBatchConfig() BatchConfig {
	return BatchConfig{MaxBatch: 256, Linger: 2 * time.Millisecond, Workers: 2}
}

// ErrBatchStopped is returned to callers whose event was not processed
// because the batch processor stopped.
var ErrBatchStopped = errors.New("batch processor stopped")

type batchRequest struct {
	ctx  context.Context
	env  event.Envelope
	done chan batchResult
}

type batchResult struct {
	outcome versionguard.Outcome
	err     error
}

// BatchProcessor applies the in-flight events of many partitions in one
// transaction: dedup rows, version guards and side effects of all of them,
// then one commit, and only then is each caller told its event is done (so
// it acknowledges after the commit, never before). It is group commit: while
// one batch is in its transaction the next one gathers, so a busy consumer
// gets big batches and an idle one gets no added latency.
//
// If a batch fails, each of its events is retried alone in its own
// transaction, so one failing event fails alone.
type BatchProcessor struct {
	p        *Processor
	cfg      BatchConfig
	reqs     chan *batchRequest
	sizes    prometheus.Observer
	fellBack prometheus.Counter
}

// NewBatchProcessor returns a batch processor over p; reg may be nil.
func NewBatchProcessor(p *Processor, cfg BatchConfig, reg prometheus.Registerer) *BatchProcessor {
	if cfg.MaxBatch < 1 {
		cfg.MaxBatch = 1
	}
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	sizes := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "consumer_batch_size", Help: "Events applied in one transaction.",
		ConstLabels: prometheus.Labels{"consumer": p.consumer},
		Buckets:     prometheus.ExponentialBuckets(1, 2, 11),
	})
	fellBack := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "consumer_batch_fallbacks_total", Help: "Batches that failed and were retried event by event.",
		ConstLabels: prometheus.Labels{"consumer": p.consumer},
	})
	if reg != nil {
		reg.MustRegister(sizes, fellBack)
	}
	return &BatchProcessor{p: p, cfg: cfg, reqs: make(chan *batchRequest), sizes: sizes, fellBack: fellBack}
}

// Process hands env to the batch worker and waits until its transaction
// committed (or failed). Safe for concurrent use: that is the point.
func (b *BatchProcessor) Process(ctx context.Context, env event.Envelope) (versionguard.Outcome, error) {
	if !b.p.guard.Transitions().Handles(env.EventType) {
		return NotHandled, nil
	}
	if b.cfg.MaxBatch == 1 {
		// Batching off: each caller runs its own transaction, concurrently
		// with the others, exactly as without a batch processor.
		ctx, span := startApply(ctx, b.p.consumer, ctx)
		outcome, err := b.p.Process(ctx, env)
		endApply(span, []string{env.EventID}, []versionguard.Outcome{outcome}, err)
		return outcome, err
	}
	req := &batchRequest{ctx: ctx, env: env, done: make(chan batchResult, 1)}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case res := <-req.done:
		return res.outcome, res.err
	case <-ctx.Done():
		// The batch may still commit; the message is then redelivered and
		// found in the dedup table.
		return "", ctx.Err()
	}
}

// Run runs the batch workers; it returns when ctx ends. With batching off
// it has nothing to do but wait.
func (b *BatchProcessor) Run(ctx context.Context) error {
	if b.cfg.MaxBatch == 1 {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	for range b.cfg.Workers {
		wg.Go(func() { b.work(ctx) })
	}
	wg.Wait()
	return nil
}

// work gathers and applies one batch after another until ctx ends.
func (b *BatchProcessor) work(ctx context.Context) {
	for {
		var batch []*batchRequest
		select {
		case <-ctx.Done():
			return
		case r := <-b.reqs:
			batch = append(batch, r)
		}
		batch = b.gather(ctx, batch)
		b.sizes.Observe(float64(len(batch)))
		b.process(ctx, batch)
	}
}

// gather adds to batch what arrives within the linger time, up to MaxBatch.
func (b *BatchProcessor) gather(ctx context.Context, batch []*batchRequest) []*batchRequest {
	linger := time.NewTimer(b.cfg.Linger)
	defer linger.Stop()
	for len(batch) < b.cfg.MaxBatch {
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-linger.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}

// process applies batch and then tells each caller what became of its
// event. The batch's span ends first, so it ends inside the spans of the
// messages it carried, and a caller that reads the trace once it is told
// finds the span there.
func (b *BatchProcessor) process(ctx context.Context, batch []*batchRequest) {
	results := b.apply(ctx, batch)
	for i, r := range batch {
		r.done <- results[i]
	}
}

// apply runs batch in one transaction, or each event alone in its own
// when the batch fails, under one span, and returns each event's result:
// the span says each event's outcome and fails with the first error.
func (b *BatchProcessor) apply(ctx context.Context, batch []*batchRequest) (results []batchResult) {
	events := make([]context.Context, len(batch))
	for i, r := range batch {
		events[i] = r.ctx
	}
	ctx, span := startApply(ctx, b.p.consumer, events...)
	defer func() {
		ids := make([]string, len(batch))
		outcomes := make([]versionguard.Outcome, len(batch))
		var failed error
		for i, r := range results {
			ids[i], outcomes[i] = batch[i].env.EventID, r.outcome
			if failed == nil {
				failed = r.err
			}
		}
		endApply(span, ids, outcomes, failed)
	}()
	results = make([]batchResult, len(batch))
	if len(batch) == 1 {
		outcome, err := b.p.Process(ctx, batch[0].env)
		results[0] = batchResult{outcome, err}
		return results
	}
	// Aggregate rows are locked in aggregate order, so two batches that
	// share aggregates (during a rebalance) cannot deadlock on them.
	sort.SliceStable(batch, func(i, j int) bool { return batch[i].env.AggregateID < batch[j].env.AggregateID })
	envs := make([]event.Envelope, len(batch))
	for i, r := range batch {
		envs[i] = r.env
	}
	applied, err := b.p.inTx(ctx, envs)
	if err == nil {
		for i := range batch {
			results[i] = batchResult{outcome: applied[i]}
		}
		return results
	}
	// One at a time, each in its own transaction under this span.
	b.fellBack.Inc()
	for i, r := range batch {
		outcome, err := b.p.Process(ctx, r.env)
		results[i] = batchResult{outcome, err}
	}
	return results
}
