package lag

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
)

// Report answers GET /admin/lag: the group's lag per partition and the
// consumer's rates, the four backlog figures of the tutorial in one place.
type Report struct {
	Group            string      `json:"group"`
	Topic            string      `json:"topic"`
	SampledAt        time.Time   `json:"sampledAt"`
	Partitions       []Partition `json:"partitions"`
	TotalLag         int64       `json:"totalLag"`
	OldestAgeSeconds float64     `json:"oldestAgeSeconds"`
	// WindowSeconds is the span the rates below are averaged over.
	WindowSeconds        float64 `json:"windowSeconds"`
	ProducedPerSecond    float64 `json:"producedPerSecond"`
	ConsumedPerSecond    float64 `json:"consumedPerSecond"`
	RetriesPerSecond     float64 `json:"retriesPerSecond"`
	DeadLettersPerSecond float64 `json:"deadLettersPerSecond"`
	HandlerP50Seconds    float64 `json:"handlerP50Seconds"`
	HandlerP99Seconds    float64 `json:"handlerP99Seconds"`
}

// Register returns a monitor of cfg's group whose gauges are registered
// with reg and whose report is served at GET /lag of g (the service's
// /admin group). Run the monitor in the service's errgroup, and register
// the consumer's metrics through its Registerer.
func Register(g *echo.Group, reg prometheus.Registerer, cfg Config) *Monitor {
	m := NewMonitor(cfg, reg)
	g.GET("/lag", m.serveReport)
	return m
}

// Report is s with the consumer's rates over the window: what GET
// /admin/lag answers.
func (m *Monitor) Report(s Sample) Report {
	r := m.Rates()
	partitions := s.Partitions
	if partitions == nil {
		partitions = []Partition{}
	}
	return Report{
		Group:                s.Group,
		Topic:                s.Topic,
		SampledAt:            s.SampledAt.UTC(),
		Partitions:           partitions,
		TotalLag:             s.TotalLag,
		OldestAgeSeconds:     s.OldestAge.Seconds(),
		WindowSeconds:        r.Window.Seconds(),
		ProducedPerSecond:    r.Produced,
		ConsumedPerSecond:    r.Consumed,
		RetriesPerSecond:     r.Retries,
		DeadLettersPerSecond: r.DeadLetters,
		HandlerP50Seconds:    r.HandlerP50.Seconds(),
		HandlerP99Seconds:    r.HandlerP99.Seconds(),
	}
}

func (m *Monitor) serveReport(c echo.Context) error {
	s, err := m.Sample(c.Request().Context())
	if err != nil {
		return &httpapi.Error{Status: http.StatusServiceUnavailable, BusinessCode: httpapi.CodeUnavailable,
			Message: "cannot measure the consumer lag: " + err.Error(), Err: err}
	}
	return c.JSON(http.StatusOK, m.Report(s))
}

// Operations describe the route of Register.
func Operations() []apispec.Operation {
	return []apispec.Operation{{Method: http.MethodGet, Path: "/admin/lag",
		Summary: "The consumer group's lag, rates and handler latency.", Answer: Report{}}}
}
