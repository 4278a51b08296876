package backlog

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// File names under Config.Out.
const (
	JSONFile = "report.json"
	HTMLFile = "report.html"
)

// jsonFile is report.json: the report and every sample.
type jsonFile struct {
	Report  *Report  `json:"report"`
	Samples []Sample `json:"samples"`
}

// writeFiles writes report.json and report.html under dir.
func writeFiles(dir string, r *Report, samples []Sample) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	b, err := json.MarshalIndent(jsonFile{Report: r, Samples: samples}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", JSONFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, JSONFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", JSONFile, err)
	}
	f, err := os.Create(filepath.Join(dir, HTMLFile))
	if err != nil {
		return fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	if err := WriteHTML(f, r, samples); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", HTMLFile, err)
	}
	return nil
}

// colour is the colour of the i-th line of a chart.
func colour(i int) string {
	palette := [...]string{"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"}
	return palette[i%len(palette)]
}

// series is one line of a chart.
type series struct {
	Name   string
	Colour string
	Dashed bool
	x, y   []float64
}

// seriesOf draws one line per name over the samples, coloured by its
// place; value gives the point of line i in sample j, NaN for none.
func seriesOf(samples []Sample, names []string, value func(j, i int) float64) []series {
	out := make([]series, len(names))
	for i, name := range names {
		out[i] = series{Name: name, Colour: colour(i)}
		for j, s := range samples {
			if v := value(j, i); !math.IsNaN(v) {
				out[i].x = append(out[i].x, s.Elapsed)
				out[i].y = append(out[i].y, v)
			}
		}
	}
	return out
}

// marker is a vertical line at a moment of the run.
type marker struct {
	at    float64
	label string
}

// page is the HTML rendering of a view: the report's tables, the checks
// and the charts, no script, no external asset.
var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Backlog drill {{.RunID}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#c62828;font-weight:600}
.note{color:#555;max-width:900px}table.left td,table.left th{text-align:left}svg{display:block;margin:6px 0 18px}code{background:#f4f4f4;padding:0 3px}
</style></head><body>
<h1>Backlog drill <code>{{.RunID}}</code>: {{if .Pass}}<span class="pass">PASS{{else}}<span class="fail">FAIL{{end}}</span></h1>
<p class="note">{{.Summary}}, sampled every {{.Interval}}. Started {{.StartedAt.Format "2006-01-02 15:04:05 UTC"}}.</p>
<h2>Moments</h2><table class="left">
{{range .Moments}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
<h2>Per consumer group</h2><table>
{{range $i, $row := .Groups}}<tr>{{range $row}}{{if $i}}<td>{{.}}</td>{{else}}<th>{{.}}</th>{{end}}{{end}}</tr>
{{end}}</table>
{{range .Charts}}<h2>{{.Heading}}</h2><p class="note">{{.Note}}</p>
{{template "chart" .Drawing}}{{end}}<h2>Peak database connections</h2><table><tr><th>database</th><th>open / in use</th></tr>
{{range .Connections}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
<h2>Partition assignment at the end</h2><table class="left"><tr><th>group</th><th>instance: partitions</th></tr>
{{range .Assignment}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
<h2>Checks</h2><table class="left"><tr><th>result</th><th>check</th><th>want</th><th>got</th></tr>
{{range .Checks}}<tr>{{if .Pass}}<td class="pass">PASS{{else}}<td class="fail">FAIL{{end}}</td><td>{{.Name}}</td><td>{{.Want}}</td><td>{{.Got}}</td></tr>
{{end}}</table>
{{with .Errors}}<p class="note">{{.}}</p>
{{end}}<p class="note">Every sample is in report.json next to this page. docs/backlog.md explains the figures.</p>
</body></html>
{{define "chart"}}<svg width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" font-family="sans-serif" font-size="11">
<text x="{{.Left}}" y="14" font-size="13" font-weight="600">{{.Title}}</text>
{{range .YTicks}}<line {{template "ends" .}} stroke="#e5e5e5"/><text {{template "label" .}} text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line {{template "ends" .}} stroke="#999"/><text {{template "label" .}} text-anchor="middle">{{.Label}}</text>
{{end}}<line {{template "ends" .Axis}} stroke="#999"/>
{{range .Markers}}<line {{template "ends" .}} stroke="#c62828" stroke-dasharray="4 3"/><text {{template "label" .}} fill="#c62828" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Lines}}{{if .Points}}<polyline fill="none" stroke="{{.Colour}}" stroke-width="1.8"{{if .Dashed}} stroke-dasharray="6 4"{{end}} points="{{.Points}}"><title>{{.Name}}</title></polyline>
{{end}}{{end}}{{range .Lines}}<line {{template "ends" .Legend}} stroke="{{.Colour}}" stroke-width="3"/><text {{template "label" .Legend}}>{{.Name}}</text>
{{end}}</svg>
{{end}}{{define "ends"}}x1="{{printf "%.1f" .X1}}" x2="{{printf "%.1f" .X2}}" y1="{{printf "%.1f" .Y1}}" y2="{{printf "%.1f" .Y2}}"{{end}}{{define "label"}}x="{{printf "%.1f" .LX}}" y="{{printf "%.1f" .LY}}"{{end}}`))

// chart is one chart of the page with its heading and what it shows.
type chart struct {
	Heading, Note string
	Drawing       drawing
}

// WriteHTML writes a self-contained page — no script, no external asset —
// with the report's figures, the checks and inline SVG charts of lag,
// oldest message age, throughput, memory and database connections over
// time, the scale-out marked on each.
func WriteHTML(w io.Writer, r *Report, samples []Sample) error {
	markers := reportMarkers(r)
	var groups, dbs []string
	if len(samples) > 0 {
		for _, g := range samples[0].Groups {
			groups = append(groups, g.Service)
		}
		for _, c := range samples[0].Connections {
			dbs = append(dbs, c.Database)
		}
	}
	// groupSeries draws value per group; measured leaves out the samples
	// where the group's lag could not be measured (Lag -1).
	groupSeries := func(measured bool, value func(GroupSample) float64) []series {
		return seriesOf(samples, groups, func(j, i int) float64 {
			if i >= len(samples[j].Groups) || (measured && samples[j].Groups[i].Lag < 0) {
				return math.NaN()
			}
			return value(samples[j].Groups[i])
		})
	}
	// Throughput shows the scaled groups only, and the publish rate.
	tp := slices.DeleteFunc(groupSeries(false, func(g GroupSample) float64 { return g.ConsumedPerSecond }),
		func(s series) bool { return !slices.Contains(r.Services, s.Name) })
	pub := seriesOf(samples, []string{"published"}, func(j, _ int) float64 {
		if j == 0 || samples[j].Elapsed <= samples[j-1].Elapsed {
			return math.NaN()
		}
		return float64(samples[j].Published-samples[j-1].Published) / (samples[j].Elapsed - samples[j-1].Elapsed)
	})[0]
	if pub.Colour, pub.Dashed = "#7f7f7f", true; len(samples) > 1 {
		tp = append(tp, pub)
	}
	// The publish is often far faster than the consumers: let it run off
	// the top rather than flatten their lines.
	consumedMax, pubMax := 0.0, 0.0
	for _, s := range tp {
		for _, y := range s.y {
			if s.Dashed {
				pubMax = max(pubMax, y)
			} else {
				consumedMax = max(consumedMax, y)
			}
		}
	}
	tpCap, tpNote := 0.0, ""
	if consumedMax > 0 && pubMax > 3*consumedMax {
		tpCap = niceCeil(1.2 * consumedMax)
		tpNote = fmt.Sprintf(" The publish peaked at %s events/s, off the top of the chart.", count(pubMax))
	}
	rss := func(g GroupSample) float64 {
		m := 0.0
		for _, in := range g.Instances {
			m = max(m, in.RSS/(1<<20))
		}
		if m == 0 {
			return math.NaN() // no process scraped this round: no point
		}
		return m
	}
	charts := []chart{
		{"Lag", "Messages not yet processed per group (log end offset minus committed offset, summed over the partitions). It climbs while the publish outruns the consumers, and must fall faster after the scale-out.",
			lineChart("consumer lag (messages)", groupSeries(true, func(g GroupSample) float64 { return float64(g.Lag) }), markers, count, 0)},
		{"Oldest unprocessed message", "How long the oldest waiting message has waited: the business delay, what an alert fires on. It keeps rising as long as the consumers work through messages older than their progress.",
			lineChart("oldest message age (seconds)", groupSeries(true, func(g GroupSample) float64 { return g.OldestAge }), markers, seconds, 0)},
		{"Throughput", "Messages each scaled group finished per second, over all its instances (consumer_messages_total ok + rejected), and the publish rate (dashed); payment, which only acknowledges OrderPaid, is in the tables and report.json. After the scale-out the scaled groups' rate must rise; where it does not, the limit is elsewhere (database, CPU)." + tpNote,
			lineChart("consumed per second", tp, markers, count, tpCap)},
		{"Memory", "The largest resident memory of one process of each service (process_resident_memory_bytes).",
			lineChart("peak RSS of one process (MiB)", groupSeries(false, rss), markers, func(v float64) string { return fmt.Sprintf("%.0f", v) }, 0)},
		{"Database connections in use", "Connections of each service database that are not idle (pg_stat_activity): more instances mean more pools; watch this against max_connections.",
			lineChart("connections in use", seriesOf(samples, dbs, func(j, i int) float64 {
				if i >= len(samples[j].Connections) {
					return math.NaN()
				}
				return float64(samples[j].Connections[i].InUse)
			}), markers, count, 0)},
	}
	return page.Execute(w, struct {
		view
		Interval string
		Charts   []chart
	}{newView(r), seconds(r.IntervalSeconds), charts})
}

func reportMarkers(r *Report) []marker {
	var out []marker
	add := func(v *float64, label string) {
		if v != nil {
			out = append(out, marker{at: *v, label: label})
		}
	}
	add(r.ScaleRequested, fmt.Sprintf("scale-out to %d", r.Instances))
	add(r.Rebalanced, "settled")
	add(r.PublishSeconds, "published")
	add(r.Drained, "drained")
	return out
}

// Chart geometry.
const (
	chartW, chartH = 960, 280
	padL, padR     = 70, 20
	padT, padB     = 52, 58
	labelRowH      = 12 // marker labels close to each other go on separate rows
)

// lineChart draws series over time as an inline SVG, with a y axis from 0
// to a round maximum (or yCap, when positive: higher values are drawn at
// the top), the x axis in seconds and markers as dashed vertical lines.
// label formats the y ticks.
func lineChart(title string, ss []series, markers []marker, label func(float64) string, yCap float64) drawing {
	maxX, maxY := 1.0, 0.0
	for _, s := range ss {
		for i := range s.x {
			maxX, maxY = max(maxX, s.x[i]), max(maxY, s.y[i])
		}
	}
	for _, m := range markers {
		maxX = max(maxX, m.at)
	}
	maxY = niceCeil(maxY)
	if yCap > 0 {
		maxY = min(maxY, yCap)
	}
	w, h := float64(chartW-padL-padR), float64(chartH-padT-padB)
	px := func(x float64) float64 { return padL + x/maxX*w }
	py := func(y float64) float64 { return padT + h - min(y, maxY)/maxY*h }

	d := drawing{Title: title, W: chartW, H: chartH, Left: padL, Axis: mark{X1: padL, X2: chartW - padR, Y1: py(0), Y2: py(0)}}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		d.YTicks = append(d.YTicks, mark{padL, chartW - padR, py(v), py(v), padL - 6, py(v) + 4, label(v)})
	}
	step, bottom := niceStep(maxX/8), padT+h
	for x := 0.0; x <= maxX+1e-9; x += step {
		d.XTicks = append(d.XTicks, mark{px(x), px(x), bottom, bottom + 4, px(x), bottom + 16, fmt.Sprintf("%gs", x)})
	}
	rowEnd := []float64{} // the right end of the last label on each row
	for _, m := range markers {
		x := px(m.at)
		width := 6.5 * float64(len(m.label))
		row := 0
		for row < len(rowEnd) && x-width/2 < rowEnd[row]+6 {
			row++
		}
		if row == len(rowEnd) {
			rowEnd = append(rowEnd, 0)
		}
		rowEnd[row] = x + width/2
		y := float64(padT - 4 - labelRowH*(row%3))
		d.Markers = append(d.Markers, mark{x, x, y + 2, py(0), x, y, m.label})
	}
	x := float64(padL)
	for _, s := range ss {
		pts := make([]string, len(s.x))
		for i := range s.x {
			pts[i] = fmt.Sprintf("%.1f,%.1f", px(s.x[i]), py(s.y[i]))
		}
		y := float64(chartH - 12)
		d.Lines = append(d.Lines, line{s, strings.Join(pts, " "), mark{x, x + 18, y - 4, y - 4, x + 22, y, ""}})
		x += 40 + 7*float64(len(s.Name))
	}
	return d
}

// drawing is a chart as the page's "chart" template draws it: the
// positions are worked out here, the texts escaped there.
type drawing struct {
	Title                   string
	W, H, Left              int
	Axis                    mark // the x axis
	YTicks, XTicks, Markers []mark
	Lines                   []line
}

// mark is a line from (X1, Y1) to (X2, Y2) and its label at (LX, LY): a
// tick, a marker or a line's sample in the legend.
type mark struct {
	X1, X2, Y1, Y2, LX, LY float64
	Label                  string
}

// line is one series as drawn, with its sample in the legend.
type line struct {
	series
	Points string
	Legend mark
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (1 for
// v ≤ 0).
func niceCeil(v float64) float64 { return roundUp(v, 1, 2, 2.5, 5) }

// niceStep is a round tick step at or above v: 1, 2 or 5 times a power
// of ten.
func niceStep(v float64) float64 { return roundUp(v, 1, 2, 5) }

// roundUp rounds v up to one of the multiples of its power of ten, or the
// next power (1 for v ≤ 0).
func roundUp(v float64, multiples ...float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range multiples {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
