package suiteapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric sums the samples of a Prometheus counter or gauge (for a
// histogram: its observation counts) on a service's /metrics whose labels
// include labels. A metric the service has not exposed yet is 0: a
// counter appears at its first increment.
func (c *Client) Metric(ctx context.Context, service, name string, labels map[string]string) (float64, error) {
	families, err := c.MetricFamilies(ctx, service)
	return sumSamples(families, name, labels), err
}

// MetricFamilies reads a service's /metrics, by metric name.
func (c *Client) MetricFamilies(ctx context.Context, service string) (map[string]*dto.MetricFamily, error) {
	code, raw, err := c.Raw(ctx, service, http.MethodGet, "/metrics", nil, nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, statusError(http.MethodGet, c.URL(service)+"/metrics", code, raw)
	}
	families, err := ParseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", service, err)
	}
	return families, nil
}

// ParseMetrics reads a Prometheus text exposition, by metric name.
func ParseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// SumSamples is Metric over a Prometheus text exposition.
func SumSamples(r io.Reader, name string, labels map[string]string) (float64, error) {
	families, err := ParseMetrics(r)
	if err != nil {
		return 0, err
	}
	return sumSamples(families, name, labels), nil
}

func sumSamples(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	sum := 0.0
	for _, m := range families[name].GetMetric() {
		if !hasLabels(m, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if !slices.ContainsFunc(m.GetLabel(), func(lp *dto.LabelPair) bool { return lp.GetName() == k && lp.GetValue() == v }) {
			return false
		}
	}
	return true
}
