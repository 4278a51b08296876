package messaging

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the consumer figures the tutorial names: throughput, handler
// duration, retry and DLQ rates, and end-to-end convergence latency.
type Metrics struct {
	handledTotal *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	retries      *prometheus.CounterVec
	dlq          *prometheus.CounterVec
	convergence  *prometheus.HistogramVec
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
	}
	reg.MustRegister(m.handledTotal, m.duration, m.retries, m.dlq, m.convergence)
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

func (m *Metrics) converged(consumer string, d time.Duration) {
	if m != nil {
		m.convergence.WithLabelValues(consumer).Observe(d.Seconds())
	}
}
