package backlog

import (
	"context"
	"math"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// metricValues are the figures the drill reads from one process's /metrics
// (pkg/messaging's consumer metrics and the Go client's process metrics).
type metricValues struct {
	// consumed counts consumer_messages_total{outcome="ok"|"rejected"}: the
	// messages the handler finished, applied or refused for good.
	consumed    float64
	retries     float64
	deadLetters float64
	// rss is process_resident_memory_bytes.
	rss float64
	// handlerBuckets are consumer_handler_duration_seconds' cumulative
	// bucket counts by upper bound, +Inf included.
	handlerBuckets map[float64]float64
	// batchSum and batchCount are consumer_batch_size's, when exported.
	batchSum, batchCount float64
}

// metrics scrapes the /metrics of the process in for group's consumer.
func (d *drill) metrics(ctx context.Context, in Instance, group string) (metricValues, error) {
	families, err := d.instance(in).MetricFamilies(ctx, in.Name)
	if err != nil {
		return metricValues{}, err
	}
	return valuesOf(families, group), nil
}

// valuesOf keeps the series of consumer (their "consumer" label) and the
// process's own.
func valuesOf(families map[string]*dto.MetricFamily, consumer string) metricValues {
	v := metricValues{handlerBuckets: map[float64]float64{}}
	// each calls f with every series of name that is consumer's or the
	// process's own (no consumer label).
	each := func(name string, f func(m *dto.Metric)) {
		for _, m := range families[name].GetMetric() {
			if c, ok := label(m, "consumer"); !ok || c == consumer {
				f(m)
			}
		}
	}
	each("consumer_messages_total", func(m *dto.Metric) {
		if o, _ := label(m, "outcome"); o == "ok" || o == "rejected" {
			v.consumed += m.GetCounter().GetValue()
		}
	})
	each("consumer_retries_total", func(m *dto.Metric) { v.retries += m.GetCounter().GetValue() })
	each("consumer_dead_letters_total", func(m *dto.Metric) { v.deadLetters += m.GetCounter().GetValue() })
	each("process_resident_memory_bytes", func(m *dto.Metric) { v.rss = m.GetGauge().GetValue() })
	each("consumer_handler_duration_seconds", func(m *dto.Metric) {
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) { // the count below stands for it
				v.handlerBuckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		v.handlerBuckets[math.Inf(1)] += float64(h.GetSampleCount())
	})
	each("consumer_batch_size", func(m *dto.Metric) {
		v.batchSum += m.GetHistogram().GetSampleSum()
		v.batchCount += float64(m.GetHistogram().GetSampleCount())
	})
	return v
}

func label(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// quantile estimates the q-quantile of a histogram given as cumulative
// counts by upper bound, interpolating linearly inside the bucket, as
// Prometheus' histogram_quantile does. It is 0 for an empty histogram, and
// the highest finite bound when the quantile falls in the +Inf bucket.
func quantile(q float64, cumulative map[float64]float64) float64 {
	bounds := make([]float64, 0, len(cumulative))
	for le := range cumulative {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := cumulative[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		n := cumulative[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if n == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(n-below)
		}
		lower, below = le, n
	}
	return lower
}
