package app

import (
	"github.com/prometheus/client_golang/prometheus"

	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
)

// Metrics are reconciliation's figures on /metrics: the convergence of
// orders (the deadline's alert) and what runs found and did. Every label
// value exists from the start at 0, so rate() and increase() see the first
// finding, and dashboards show the series before anything happens.
type Metrics struct {
	unconverged prometheus.Gauge
	oldest      prometheus.Gauge
	convergence prometheus.Histogram
	runs        *prometheus.CounterVec
	findings    *prometheus.CounterVec
	actions     *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		unconverged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orders_unconverged",
			Help: "Orders past the convergence deadline whose services have not all reached what the order's state requires."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "orders_unconverged_oldest_age_seconds",
			Help: "Age of the oldest change of an order past the deadline and not converged; 0 when there is none."}),
		convergence: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "order_convergence_seconds",
			Help:    "From an order's state change to the last service's effect of it.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900}}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reconciliation_runs_total",
			Help: "Reconciliation runs, by outcome (succeeded, failed)."}, []string{"outcome"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reconciliation_findings_total",
			Help: "Findings of reconciliation runs, by kind and service."}, []string{"kind", "service"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "reconciliation_actions_total",
			Help: "Compensations taken, by action and outcome (done, failed)."}, []string{"action", "outcome"}),
	}
	reg.MustRegister(m.unconverged, m.oldest, m.convergence, m.runs, m.findings, m.actions)
	for _, o := range []string{"succeeded", "failed"} {
		m.runs.WithLabelValues(o)
	}
	for _, k := range []rec.Kind{rec.PaymentForUnpayableOrder, rec.MissingEffect, rec.ExtraEffect, rec.AmountMismatch,
		rec.StuckInDLQ, rec.StuckInOutbox, rec.BusinessRejection, rec.OrderVersionRegressed, rec.OrphanEffect} {
		for _, s := range []string{rec.ServiceOrder, rec.ServicePayment, rec.ServiceInventory, rec.ServicePoints, rec.ServiceNotification} {
			m.findings.WithLabelValues(string(k), s)
		}
	}
	for _, a := range []rec.ActionType{rec.ActionRefund, rec.ActionRepublish, rec.ActionReplay, rec.ActionFence} {
		for _, o := range []string{"done", "failed"} {
			m.actions.WithLabelValues(string(a), o)
		}
	}
	return m
}

func (m *Metrics) run(r rec.Run) {
	if m == nil {
		return
	}
	outcome := "succeeded"
	if r.Status == rec.RunFailed {
		outcome = "failed"
	}
	m.runs.WithLabelValues(outcome).Inc()
}

func (m *Metrics) finding(f rec.Finding) {
	if m != nil {
		m.findings.WithLabelValues(string(f.Kind), f.Service).Inc()
	}
}

func (m *Metrics) action(a rec.ActionType, s rec.ActionStatus) {
	if m == nil {
		return
	}
	outcome := "done"
	if s == rec.ActionFailed {
		outcome = "failed"
	}
	m.actions.WithLabelValues(string(a), outcome).Inc()
}
