package lag

import (
	"math"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The pkg/messaging metrics the rates are derived from.
const (
	metricMessages    = "consumer_messages_total"
	metricRetries     = "consumer_retries_total"
	metricDeadLetters = "consumer_dead_letters_total"
	metricDuration    = "consumer_handler_duration_seconds"
	labelConsumer     = "consumer"
	labelOutcome      = "outcome"
)

// consumed reports whether a consumer_messages_total outcome is a message
// the handler finished with: applied (ok) or recorded as a business
// rejection. Failed runs ("error") are retried or dead-lettered; "invalid"
// ones are dead-lettered and counted there.
func consumed(outcome string) bool { return outcome == "ok" || outcome == "rejected" }

// Rates are the consumer's figures over the recent window.
type Rates struct {
	// Window is the span the rates cover (0 until two samples exist).
	Window time.Duration
	// Consumed, Retries and DeadLetters are per second.
	Consumed    float64
	Retries     float64
	DeadLetters float64
	// Produced is the growth of the topic's end offsets per second, from
	// the lag measurements in the window (0 with fewer than two).
	Produced float64
	// HandlerP50 and HandlerP99 are quantiles of the handler's duration
	// over the window, interpolated within histogram buckets as
	// Prometheus's histogram_quantile does; 0 when nothing was handled.
	HandlerP50 time.Duration
	HandlerP99 time.Duration
}

// counterPoint is the consumer's counters at one instant.
type counterPoint struct {
	at          time.Time
	consumed    float64
	retries     float64
	deadLetters float64
	// buckets are the handler histogram's cumulative counts by upper bound,
	// ascending, +Inf included as the total.
	buckets []bucket
}

type bucket struct {
	upper float64
	count float64
}

// offsetPoint is the topic's summed end offsets at one instant.
type offsetPoint struct {
	at  time.Time
	end int64
}

// window keeps the points of the last span, plus the newest one older than
// it, so a rate always covers the whole span once it has filled.
type window struct {
	counters []counterPoint
	offsets  []offsetPoint
}

func (w *window) add(p counterPoint, span time.Duration) {
	w.counters = append(w.counters, p)
	w.counters = trim(w.counters, span, func(p counterPoint) time.Time { return p.at })
}

func (w *window) addOffsets(p offsetPoint, span time.Duration) {
	w.offsets = append(w.offsets, p)
	w.offsets = trim(w.offsets, span, func(p offsetPoint) time.Time { return p.at })
	// Measurements are taken on demand, so the left edge may be from long
	// ago; a rate over it would not be recent.
	if n := len(w.offsets); n >= 2 && w.offsets[n-1].at.Sub(w.offsets[0].at) > 2*span {
		w.offsets = w.offsets[1:]
	}
}

// trim drops points older than span before the newest, keeping the
// youngest of those as the window's left edge.
func trim[T any](points []T, span time.Duration, at func(T) time.Time) []T {
	newest := at(points[len(points)-1])
	drop := 0
	for drop+1 < len(points) && newest.Sub(at(points[drop+1])) >= span {
		drop++
	}
	return append(points[:0], points[drop:]...)
}

func (w *window) rates() Rates {
	var r Rates
	if n := len(w.offsets); n >= 2 {
		first, last := w.offsets[0], w.offsets[n-1]
		if dt := last.at.Sub(first.at).Seconds(); dt > 0 {
			r.Produced = math.Max(float64(last.end-first.end)/dt, 0)
		}
	}
	n := len(w.counters)
	if n < 2 {
		return r
	}
	first, last := w.counters[0], w.counters[n-1]
	dt := last.at.Sub(first.at)
	if dt <= 0 {
		return r
	}
	perSecond := func(a, b float64) float64 { return math.Max(b-a, 0) / dt.Seconds() }
	r.Window = dt
	r.Consumed = perSecond(first.consumed, last.consumed)
	r.Retries = perSecond(first.retries, last.retries)
	r.DeadLetters = perSecond(first.deadLetters, last.deadLetters)
	delta := bucketDelta(first.buckets, last.buckets)
	r.HandlerP50 = seconds(quantile(0.50, delta))
	r.HandlerP99 = seconds(quantile(0.99, delta))
	return r
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// bucketDelta is what the histogram observed between two points. The
// bucket bounds never change within a process; a point without a histogram
// yet counts as empty.
func bucketDelta(first, last []bucket) []bucket {
	out := make([]bucket, len(last))
	for i, b := range last {
		out[i] = b
		if i < len(first) && first[i].upper == b.upper {
			out[i].count = math.Max(b.count-first[i].count, 0)
		}
	}
	return out
}

// quantile estimates the q-quantile from cumulative buckets, assuming
// observations spread evenly within a bucket; one in the +Inf bucket is
// reported as the largest finite bound.
func quantile(q float64, buckets []bucket) float64 {
	if len(buckets) == 0 {
		return 0
	}
	total := buckets[len(buckets)-1].count
	if total == 0 {
		return 0
	}
	rank := q * total
	i := sort.Search(len(buckets), func(i int) bool { return buckets[i].count >= rank })
	if i == len(buckets) {
		i = len(buckets) - 1
	}
	if math.IsInf(buckets[i].upper, 1) {
		if i == 0 {
			return 0
		}
		return buckets[i-1].upper
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = buckets[i-1].upper, buckets[i-1].count
	}
	in := buckets[i].count - below
	if in <= 0 {
		return buckets[i].upper
	}
	return lower + (buckets[i].upper-lower)*(rank-below)/in
}

// readCounters sums the consumer's counters out of gathered families.
func readCounters(families []*dto.MetricFamily, consumer string) counterPoint {
	var p counterPoint
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if label(m, labelConsumer) != consumer {
				continue
			}
			switch f.GetName() {
			case metricMessages:
				if consumed(label(m, labelOutcome)) {
					p.consumed += m.GetCounter().GetValue()
				}
			case metricRetries:
				p.retries += m.GetCounter().GetValue()
			case metricDeadLetters:
				p.deadLetters += m.GetCounter().GetValue()
			case metricDuration:
				p.buckets = histogramBuckets(m.GetHistogram())
			}
		}
	}
	return p
}

func histogramBuckets(h *dto.Histogram) []bucket {
	out := make([]bucket, 0, len(h.GetBucket())+1)
	for _, b := range h.GetBucket() {
		out = append(out, bucket{upper: b.GetUpperBound(), count: float64(b.GetCumulativeCount())})
	}
	return append(out, bucket{upper: math.Inf(1), count: float64(h.GetSampleCount())})
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
