package backlog

import (
	"context"
	"database/sql"
	"strings"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Metrics are the figures valuesOf keeps, for the tests.
type Metrics struct {
	Consumed, Retries, DeadLetters, RSS float64
	HandlerBuckets                      map[float64]float64
	BatchSum, BatchCount                float64
}

// ParseMetrics is valuesOf over a Prometheus text exposition.
func ParseMetrics(text, consumer string) (Metrics, error) {
	families, err := suiteapi.ParseMetrics(strings.NewReader(text))
	v := valuesOf(families, consumer)
	return Metrics{v.consumed, v.retries, v.deadLetters, v.rss, v.handlerBuckets, v.batchSum, v.batchCount}, err
}

// Internals under test.
var (
	Quantile    = quantile
	SocketOwner = socketOwner
	ClientPort  = clientPort
	FormatCount = count
)

// Moments are the moments of a timeline, in seconds since the publish
// started; a negative one did not happen.
type Moments struct {
	PublishEnd, ScaleRequested, ScaleReady, Rebalanced, Drained float64
}

// BuildReport is buildReport over samples and moments, with every event
// published.
func BuildReport(cfg Config, samples []Sample, m Moments) *Report {
	cfg = cfg.withDefaults()
	at := func(v float64) *float64 {
		if v < 0 {
			return nil
		}
		return &v
	}
	tl := &timeline{samples: samples, publishEnd: at(m.PublishEnd), scaleRequested: at(m.ScaleRequested),
		scaleReady: at(m.ScaleReady), rebalanced: at(m.Rebalanced), drained: at(m.Drained)}
	tl.publish.Published = cfg.Count
	return buildReport(cfg, tl)
}

// Settled is drill.settled for a configuration.
func Settled(cfg Config, s Sample) bool {
	return (&drill{cfg: cfg.withDefaults()}).settled(s)
}

// ProgressLine is the live line of a sample.
func ProgressLine(cfg Config, s Sample) string {
	return (&progress{cfg: cfg.withDefaults()}).line(s)
}

// Verify is drill.verify of a run of cfg over dbs, each service's database
// by its short name, with the suite's consumer groups.
func Verify(ctx context.Context, cfg Config, dbs map[string]*sql.DB) ([]Check, error) {
	cfg = cfg.withDefaults()
	d := &drill{cfg: cfg, t: Target{}.withDefaults(), dbs: dbs, ids: newRunIDs(cfg)}
	return d.verify(ctx)
}
