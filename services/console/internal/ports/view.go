package ports

import (
	"fmt"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"short": func(id string) string {
		if len(id) > 8 {
			return id[:8]
		}
		return id
	},
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05.000") },
	"pct":   func(f float64) string { return fmt.Sprintf("%.3f%%", f) },
	"dur": func(d time.Duration) string {
		if d < time.Second {
			return d.Round(10 * time.Microsecond).String()
		}
		return d.Round(time.Millisecond).String()
	},
	"ms":         func(f float64) string { return fmt.Sprintf("%.1f ms", f) },
	"upper":      strings.ToUpper,
	"deref":      func(b *bool) bool { return b != nil && *b },
	"consumers":  func() []string { return app.Consumers },
	"isConsumer": func(s string) bool { return slices.Contains(app.Consumers, s) },
	"caseName": func(s string) string {
		_, name, _ := strings.Cut(s, "/")
		return name
	},
	"statuses": func() []string { return []string{app.StatusDead, app.StatusReplayed, "ALL"} },
	"outcome":  replayOutcome,
	"num": func(f float64) string {
		if f == float64(int64(f)) {
			return fmt.Sprintf("%d", int64(f))
		}
		return fmt.Sprintf("%.2f", f)
	},
	"indent": func(depth int) string {
		return fmt.Sprintf("%.1fem", float64(min(depth, 12))*0.8)
	},
}

// orderView is the order page's model: the timeline with each entry and
// span placed on its axis.
type orderView struct {
	app.Timeline
	Steps     []stepView
	Waterfall []traceView
	// Span is the time from the first step to the last.
	Span time.Duration
	// Services are the services with a step, in the order of their first.
	Services []string
}

// stepView is an entry with its offset from the first step and its place
// on the axis (percent).
type stepView struct {
	app.Entry
	Offset time.Duration
	Left   float64
}

// traceView is a trace with each span's bar (percent of the trace's span).
type traceView struct {
	app.Trace
	Duration time.Duration
	Bars     []barView
}

type barView struct {
	app.Span
	Left, Width float64
	Offset      time.Duration
}

func newOrderView(tl app.Timeline) orderView {
	v := orderView{Timeline: tl}
	if n := len(tl.Entries); n > 0 {
		first, last := tl.Entries[0].At, tl.Entries[n-1].At
		v.Span = last.Sub(first)
		for _, e := range tl.Entries {
			s := stepView{Entry: e, Offset: e.At.Sub(first)}
			if v.Span > 0 {
				s.Left = 100 * float64(s.Offset) / float64(v.Span)
			}
			v.Steps = append(v.Steps, s)
			if !slices.Contains(v.Services, e.Service) {
				v.Services = append(v.Services, e.Service)
			}
		}
	}
	for _, t := range tl.Traces {
		tv := traceView{Trace: t, Duration: t.End.Sub(t.Start)}
		total := float64(tv.Duration)
		for _, s := range t.Spans {
			b := barView{Span: s, Offset: s.Start.Sub(t.Start), Left: 0, Width: 100}
			if total > 0 {
				b.Left = 100 * float64(b.Offset) / total
				b.Width = max(100*float64(s.End.Sub(s.Start))/total, 0.4)
				b.Width = min(b.Width, 100-b.Left)
			}
			tv.Bars = append(tv.Bars, b)
		}
		v.Waterfall = append(v.Waterfall, tv)
	}
	return v
}

// replayOutcome says what a replay's outcome means (README.md, API).
func replayOutcome(o string) string {
	switch o {
	case "APPLIED":
		return "the consumer applied the event."
	case "IGNORED_STALE":
		return "the event is older than the order's state there: nothing changed."
	case "DUPLICATE":
		return "the consumer had processed it before."
	case "PARKED":
		return "it waits for its predecessor."
	case "DEAD_LETTERED":
		return "it failed again: a new dead letter."
	case "PENDING":
		return "no verdict yet; the dead letter's audit will show it."
	case "ALREADY_REPLAYED":
		return "it was replayed before: nothing was sent."
	}
	return ""
}

// chartsView is the consumers page's model: each consumer's three charts.
type chartsView struct {
	Consumers []consumerCharts
	// Window is the span of the samples shown.
	Window time.Duration
}

type consumerCharts struct {
	Service string
	Last    app.Sample
	// Sampled says there is at least one sample.
	Sampled bool
	Charts  []chart
}

// chart is one figure over time, drawn as an SVG polyline in a 300 × 100
// box, the top of the box being Max.
type chart struct {
	Title  string
	Unit   string
	Points string
	Max    float64
	Last   float64
}

// chartWidth and chartHeight are the charts' SVG view box.
const chartWidth, chartHeight = 300.0, 100.0

func newChartsView(series []app.Series) chartsView {
	v := chartsView{}
	var first, last time.Time
	for _, s := range series {
		for _, smp := range s.Samples {
			if first.IsZero() || smp.At.Before(first) {
				first = smp.At
			}
			if smp.At.After(last) {
				last = smp.At
			}
		}
	}
	v.Window = last.Sub(first).Round(time.Second)
	for _, s := range series {
		cc := consumerCharts{Service: s.Service, Sampled: len(s.Samples) > 0}
		if cc.Sampled {
			cc.Last = s.Samples[len(s.Samples)-1]
		}
		for _, f := range []struct {
			title, unit string
			value       func(app.Sample) float64
		}{
			{"lag", "messages", func(x app.Sample) float64 { return float64(x.TotalLag) }},
			{"oldest unprocessed message", "s", func(x app.Sample) float64 { return x.OldestAgeSeconds }},
			{"throughput", "messages/s", func(x app.Sample) float64 { return x.ConsumedPerSecond }},
		} {
			cc.Charts = append(cc.Charts, newChart(f.title, f.unit, s.Samples, first, last, f.value))
		}
		v.Consumers = append(v.Consumers, cc)
	}
	return v
}

func newChart(title, unit string, samples []app.Sample, first, last time.Time, value func(app.Sample) float64) chart {
	c := chart{Title: title, Unit: unit}
	for _, s := range samples {
		c.Max = max(c.Max, value(s))
	}
	if len(samples) > 0 {
		c.Last = value(samples[len(samples)-1])
	}
	top := c.Max
	if top == 0 {
		top = 1
	}
	span := float64(last.Sub(first))
	var b strings.Builder
	for i, s := range samples {
		x := chartWidth
		if span > 0 {
			x = chartWidth * float64(s.At.Sub(first)) / span
		}
		y := chartHeight - chartHeight*value(s)/top
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", x, y)
	}
	c.Points = b.String()
	return c
}
