package consumer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// Metrics are the consumer figures the tutorial names: throughput, handler
// duration, retry and DLQ rates, and end-to-end convergence latency.
type Metrics struct {
	handledTotal *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	dlq          *prometheus.CounterVec
	convergence  *prometheus.HistogramVec
	outcomes     *prometheus.CounterVec
	parked       *prometheus.GaugeVec
	gapTimeouts  *prometheus.CounterVec
}

// NewMetrics registers the consumer metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		handledTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_messages_total", Help: "Messages handled, by outcome (ok, rejected, error, invalid).",
		}, []string{"consumer", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "consumer_handler_duration_seconds", Help: "Time spent in one handler run.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"consumer"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_retries_total", Help: "Retries of retryable failures.",
		}, []string{"consumer"}),
		dlq: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_dead_letters_total", Help: "Messages sent to the DLQ, by error class.",
		}, []string{"consumer", "error_class"}),
		convergence: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "event_convergence_seconds", Help: "From the event's occurredAt to its side effect committed.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}, []string{"consumer"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_event_outcomes_total",
			Help: "Events handled, by what the inbox did with them (APPLIED, APPLIED_LATE_FACT, DUPLICATE, IGNORED_STALE_EVENT, WAITING_FOR_GAP, NOT_HANDLED).",
		}, []string{"consumer", "outcome"}),
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "consumer_parked_events", Help: "Events parked waiting for a predecessor (WAITING_FOR_GAP), as of the last gap sweep.",
		}, []string{"consumer"}),
		gapTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "consumer_gap_timeouts_total", Help: "Parked events dead-lettered because their predecessor did not arrive within PARK_DEADLINE.",
		}, []string{"consumer"}),
	}
	reg.MustRegister(m.handledTotal, m.duration, m.retries, m.dlq, m.convergence, m.outcomes, m.parked, m.gapTimeouts)
	return m
}

func (m *Metrics) deadLettered(consumer, class string) {
	if m != nil {
		m.dlq.WithLabelValues(consumer, class).Inc()
	}
}

func (m *Metrics) outcome(consumer string, o versionguard.Outcome) {
	if m != nil && o != "" {
		m.outcomes.WithLabelValues(consumer, string(o)).Inc()
	}
}

func (m *Metrics) parkedNow(consumer string, n int) {
	if m != nil {
		m.parked.WithLabelValues(consumer).Set(float64(n))
	}
}

func (m *Metrics) gapTimedOut(consumer string) {
	if m != nil {
		m.gapTimeouts.WithLabelValues(consumer).Inc()
	}
}

// The outcomes of consumer_messages_total.
const (
	outcomeOK       = "ok"
	outcomeRejected = "rejected"
	outcomeError    = "error"
	outcomeInvalid  = "invalid"
)

// boundMetrics are one consumer's series, looked up once when its router
// is built: a labelled vector hashes its label values and takes a lock on
// every look-up, and the handler path counts every message four times.
// A nil *boundMetrics counts nothing.
type boundMetrics struct {
	handledTotal map[string]prometheus.Counter
	duration     prometheus.Observer
	retries      prometheus.Counter
	convergence  prometheus.Observer
	outcomes     map[versionguard.Outcome]prometheus.Counter
	consumer     string
	all          *Metrics
}

// knownOutcomes are the inbox outcomes whose series a consumer's router
// looks up in advance; any other is looked up when it occurs.
var knownOutcomes = [...]versionguard.Outcome{
	versionguard.Applied, versionguard.AppliedLateFact, versionguard.IgnoredStale, versionguard.WaitingForGap,
	inbox.Duplicate, inbox.NotHandled,
}

// of returns consumer's series; nil when m is nil.
func (m *Metrics) of(consumer string) *boundMetrics {
	if m == nil {
		return nil
	}
	b := &boundMetrics{
		handledTotal: map[string]prometheus.Counter{},
		duration:     m.duration.WithLabelValues(consumer),
		retries:      m.retries.WithLabelValues(consumer),
		convergence:  m.convergence.WithLabelValues(consumer),
		outcomes:     map[versionguard.Outcome]prometheus.Counter{},
		consumer:     consumer,
		all:          m,
	}
	for _, o := range []string{outcomeOK, outcomeRejected, outcomeError, outcomeInvalid} {
		b.handledTotal[o] = m.handledTotal.WithLabelValues(consumer, o)
	}
	for _, o := range knownOutcomes {
		b.outcomes[o] = m.outcomes.WithLabelValues(consumer, string(o))
	}
	return b
}

func (b *boundMetrics) handled(outcome string, d time.Duration) {
	if b == nil {
		return
	}
	b.handledTotal[outcome].Inc()
	b.duration.Observe(d.Seconds())
}

// skipped counts a message the subscriber skipped as not the consumer's
// business (Runtime.Handles): consumed (outcome ok) and NOT_HANDLED, as if
// the inbox had answered it, but no handler run, so no duration.
func (b *boundMetrics) skipped() {
	if b == nil {
		return
	}
	b.handledTotal[outcomeOK].Inc()
	b.outcome(inbox.NotHandled)
}

func (b *boundMetrics) retried() {
	if b != nil {
		b.retries.Inc()
	}
}

func (b *boundMetrics) converged(d time.Duration) {
	if b != nil {
		b.convergence.Observe(d.Seconds())
	}
}

func (b *boundMetrics) outcome(o versionguard.Outcome) {
	if b == nil || o == "" {
		return
	}
	if c, ok := b.outcomes[o]; ok {
		c.Inc()
		return
	}
	b.all.outcome(b.consumer, o)
}
