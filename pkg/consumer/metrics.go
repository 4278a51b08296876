package consumer

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

func (m *Metrics) handled(consumer, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.handledTotal.WithLabelValues(consumer, outcome).Inc()
	m.duration.WithLabelValues(consumer).Observe(d.Seconds())
}

func (m *Metrics) retried(consumer string) {
	if m != nil {
		m.retries.WithLabelValues(consumer).Inc()
	}
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

func (m *Metrics) converged(consumer string, d time.Duration) {
	if m != nil {
		m.convergence.WithLabelValues(consumer).Observe(d.Seconds())
	}
}
