package outbox

import "github.com/prometheus/client_golang/prometheus"

// RelayMetrics counts what the relay delivered and what failed.
type RelayMetrics struct {
	published prometheus.Counter
	failures  prometheus.Counter
}

// NewRelayMetrics registers the relay's counters with reg.
func NewRelayMetrics(reg prometheus.Registerer) *RelayMetrics {
	m := &RelayMetrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_relay_published_total", Help: "Outbox rows delivered to the sink.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "outbox_relay_failures_total", Help: "Outbox rows whose delivery failed and will be retried.",
		}),
	}
	reg.MustRegister(m.published, m.failures)
	return m
}

func (m *RelayMetrics) sent(n int) {
	if m != nil {
		m.published.Add(float64(n))
	}
}

func (m *RelayMetrics) failed(n int) {
	if m != nil {
		m.failures.Add(float64(n))
	}
}
