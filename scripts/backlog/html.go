package backlog

import (
	"encoding/json"
	"fmt"
	"html"
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
	name   string
	colour string
	dashed bool
	x, y   []float64
}

// marker is a vertical line at a moment of the run.
type marker struct {
	at    float64
	label string
}

// WriteHTML writes a self-contained page — no script, no external asset —
// with the report's figures, the checks and inline SVG charts of lag,
// oldest message age, throughput, memory and database connections over
// time, the scale-out marked on each.
func WriteHTML(w io.Writer, r *Report, samples []Sample) error {
	var b strings.Builder
	esc := html.EscapeString
	verdict, vclass := "PASS", "pass"
	if !r.Pass {
		verdict, vclass = "FAIL", "fail"
	}
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Backlog drill %s</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#c62828;font-weight:600}
.note{color:#555;max-width:900px}table.left td,table.left th{text-align:left}svg{display:block;margin:6px 0 18px}code{background:#f4f4f4;padding:0 3px}
</style></head><body>
<h1>Backlog drill <code>%s</code>: <span class="%s">%s</span></h1>
<p class="note">%d OrderPaid events published straight to the topic; %s scaled from 1 to %d instances %s after the publish started; sampled every %s.
Started %s.</p>
`, esc(r.RunID), esc(r.RunID), vclass, verdict, r.Count, esc(strings.Join(r.Services, ", ")), r.Instances,
		seconds(r.ScaleAfterSeconds), seconds(r.IntervalSeconds), r.StartedAt.Format("2006-01-02 15:04:05 UTC"))

	fmt.Fprintf(&b, "<h2>Moments</h2><table>\n")
	for _, m := range [][2]string{
		{"time to drain (no lag, every event recorded)", moment(r.Drained)},
		{"publish ended", fmt.Sprintf("%s (%s events/s)", moment(r.PublishSeconds), count(r.PublishRate))},
		{"scale-out requested", moment(r.ScaleRequested)},
		{"new instances ready", moment(r.ScaleReady)},
		{"groups settled (one member per instance, each with partitions)", moment(r.Rebalanced)},
	} {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>\n", esc(m[0]), esc(m[1]))
	}
	b.WriteString("</table>\n<h2>Per consumer group</h2><table><tr><th></th>")
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "<th>%s</th>", esc(g.Service))
	}
	b.WriteString("</tr>\n")
	row := func(name string, cell func(GroupReport) string) {
		fmt.Fprintf(&b, "<tr><td>%s</td>", esc(name))
		for _, g := range r.Groups {
			fmt.Fprintf(&b, "<td>%s</td>", esc(cell(g)))
		}
		b.WriteString("</tr>\n")
	}
	for _, gr := range groupRows() {
		if !gr.tableOnly {
			row(gr.name, gr.cell)
		}
	}
	b.WriteString("</table>\n")

	markers := reportMarkers(r)
	// groupSeries draws value per group; measured leaves out the samples
	// where the group's lag could not be measured (Lag -1), scaledOnly the
	// groups that were not scaled.
	groupSeries := func(measured, scaledOnly bool, value func(GroupSample) float64) []series {
		var out []series
		if len(samples) == 0 {
			return nil
		}
		for gi, g := range samples[0].Groups {
			if scaledOnly && !slices.Contains(r.Services, g.Service) {
				continue
			}
			s := series{name: g.Service, colour: colour(gi)}
			for _, smp := range samples {
				if gi < len(smp.Groups) && (!measured || smp.Groups[gi].Lag >= 0) {
					if v := value(smp.Groups[gi]); !math.IsNaN(v) {
						s.x = append(s.x, smp.Elapsed)
						s.y = append(s.y, v)
					}
				}
			}
			out = append(out, s)
		}
		return out
	}
	b.WriteString("<h2>Lag</h2><p class=\"note\">Messages not yet processed per group (log end offset minus committed offset, summed over the partitions). It climbs while the publish outruns the consumers, and must fall faster after the scale-out.</p>\n")
	b.WriteString(lineChart("consumer lag (messages)", groupSeries(true, false, func(g GroupSample) float64 { return float64(g.Lag) }), markers, count, 0))
	b.WriteString("<h2>Oldest unprocessed message</h2><p class=\"note\">How long the oldest waiting message has waited: the business delay, what an alert fires on. It keeps rising as long as the consumers work through messages older than their progress.</p>\n")
	b.WriteString(lineChart("oldest message age (seconds)", groupSeries(true, false, func(g GroupSample) float64 { return g.OldestAge }), markers, seconds, 0))
	tp := groupSeries(false, true, func(g GroupSample) float64 { return g.ConsumedPerSecond })
	if len(samples) > 1 {
		pub := series{name: "published", colour: "#7f7f7f", dashed: true}
		for i := 1; i < len(samples); i++ {
			dt := samples[i].Elapsed - samples[i-1].Elapsed
			if dt > 0 {
				pub.x = append(pub.x, samples[i].Elapsed)
				pub.y = append(pub.y, float64(samples[i].Published-samples[i-1].Published)/dt)
			}
		}
		tp = append(tp, pub)
	}
	// The publish is often far faster than the consumers: let it run off
	// the top rather than flatten their lines.
	consumedMax, pubMax := 0.0, 0.0
	for _, s := range tp {
		for _, y := range s.y {
			if s.dashed {
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
	b.WriteString("<h2>Throughput</h2><p class=\"note\">Messages each scaled group finished per second, over all its instances (consumer_messages_total ok + rejected), and the publish rate (dashed); payment, which only acknowledges OrderPaid, is in the tables and report.json. After the scale-out the scaled groups' rate must rise; where it does not, the limit is elsewhere (database, CPU)." + tpNote + "</p>\n")
	b.WriteString(lineChart("consumed per second", tp, markers, count, tpCap))
	b.WriteString("<h2>Memory</h2><p class=\"note\">The largest resident memory of one process of each service (process_resident_memory_bytes).</p>\n")
	b.WriteString(lineChart("peak RSS of one process (MiB)", groupSeries(false, false, func(g GroupSample) float64 {
		m := 0.0
		for _, in := range g.Instances {
			m = max(m, in.RSS/(1<<20))
		}
		if m == 0 {
			return math.NaN() // no process scraped this round: no point
		}
		return m
	}), markers, func(v float64) string { return fmt.Sprintf("%.0f", v) }, 0))
	var conns []series
	if len(samples) > 0 {
		for ci, c := range samples[0].Connections {
			s := series{name: c.Database, colour: colour(ci)}
			for _, smp := range samples {
				if ci < len(smp.Connections) {
					s.x = append(s.x, smp.Elapsed)
					s.y = append(s.y, float64(smp.Connections[ci].InUse))
				}
			}
			conns = append(conns, s)
		}
	}
	b.WriteString("<h2>Database connections in use</h2><p class=\"note\">Connections of each service database that are not idle (pg_stat_activity): more instances mean more pools; watch this against max_connections.</p>\n")
	b.WriteString(lineChart("connections in use", conns, markers, count, 0))

	b.WriteString("<h2>Peak database connections</h2><table><tr><th>database</th><th>open</th><th>in use</th></tr>\n")
	for _, c := range r.Connections {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%d</td><td>%d</td></tr>\n", esc(c.Database), c.PeakOpen, c.PeakInUse)
	}
	fmt.Fprintf(&b, "<tr><td>the whole server (anyone's)</td><td>%d</td><td>of max_connections %d</td></tr>\n", r.PeakServerConnections, r.MaxConnections)
	b.WriteString("</table>\n<h2>Partition assignment at the end</h2><table class=\"left\"><tr><th>group</th><th>instance: partitions</th></tr>\n")
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td></tr>\n", esc(g.Group), esc(assignment(g.Assignment)))
	}
	b.WriteString("</table>\n<h2>Checks</h2><table class=\"left\"><tr><th>result</th><th>check</th><th>want</th><th>got</th></tr>\n")
	for _, c := range r.Checks {
		v, cls := "PASS", "pass"
		if !c.Pass {
			v, cls = "FAIL", "fail"
		}
		fmt.Fprintf(&b, "<tr><td class=\"%s\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			cls, v, esc(c.Name), esc(c.Want), esc(c.Got))
	}
	b.WriteString("</table>\n")
	if r.SampleErrors > 0 {
		fmt.Fprintf(&b, "<p class=\"note\">%d samples missed a measurement, e.g. %s</p>\n", r.SampleErrors, esc(strings.Join(r.FirstErrors, "; ")))
	}
	b.WriteString("<p class=\"note\">Every sample is in report.json next to this page. docs/backlog.md explains the figures.</p>\n</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
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
func lineChart(title string, ss []series, markers []marker, label func(float64) string, yCap float64) string {
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

	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="14" font-size="13" font-weight="600">%s</text>`+"\n", padL, html.EscapeString(title))
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		y := py(v)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, padL, chartW-padR, y, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y+4, html.EscapeString(label(v)))
	}
	step := niceStep(maxX / 8)
	for x := 0.0; x <= maxX+1e-9; x += step {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#999"/>`, px(x), px(x), padT+int(h), padT+int(h)+4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%gs</text>`+"\n", px(x), padT+int(h)+16, x)
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999"/>`+"\n", padL, chartW-padR, py(0), py(0))
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
		y := padT - 4 - labelRowH*(row%3)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.1f" stroke="#c62828" stroke-dasharray="4 3"/>`, x, x, y+2, py(0))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#c62828" text-anchor="middle">%s</text>`+"\n", x, y, html.EscapeString(m.label))
	}
	for _, s := range ss {
		if len(s.x) == 0 {
			continue
		}
		pts := make([]string, len(s.x))
		for i := range s.x {
			pts[i] = fmt.Sprintf("%.1f,%.1f", px(s.x[i]), py(s.y[i]))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"><title>%s</title></polyline>`+"\n",
			s.colour, dash, strings.Join(pts, " "), html.EscapeString(s.name))
	}
	x := float64(padL)
	for _, s := range ss {
		y := float64(chartH - 12)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`, x, x+18, y-4, y-4, s.colour)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`+"\n", x+22, y, html.EscapeString(s.name))
		x += 40 + 7*float64(len(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten (1 for
// v ≤ 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// niceStep is a round tick step at or above v: 1, 2 or 5 times a power
// of ten.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
