package benchtables

import (
	"bytes"
	"fmt"
	"image/color"
	"maps"
	"path"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// File is a generated file besides the document: a chart.
type File struct {
	// Path is relative to the repository root, slash-separated.
	Path string
	Data []byte
}

// curve is a sweep's figures by offered rate, and its knee (0: none
// within the knee's bounds, -1: not reported).
type curve struct {
	rates  []int
	points map[int]map[string]float64
	knee   float64
}

// curveOf collects the per-rate figures of res; ok is false when it
// reports none.
func curveOf(res Result) (c curve, ok bool) {
	c = curve{points: map[int]map[string]float64{}, knee: -1}
	for _, m := range res.Metrics {
		if m.Unit == "knee-orders/s" {
			c.knee = m.Value
		}
		rate, column, ok := curveUnit(m.Unit)
		if !ok {
			continue
		}
		if c.points[rate] == nil {
			c.points[rate] = map[string]float64{}
		}
		c.points[rate][column] = m.Value
	}
	c.rates = slices.Sorted(maps.Keys(c.points))
	return c, len(c.rates) > 0
}

// ChartPath is where the chart of res, a result of the raw file rawFile,
// is written: beside the raw file, named after both.
func ChartPath(rawFile string, res Result) string {
	name := strings.TrimPrefix(string(baseName(res)), "Benchmark")
	return strings.TrimSuffix(rawFile, path.Ext(rawFile)) + "-" + name + ".svg"
}

// The chart's lines: the colours of the Okabe–Ito palette, which readers
// with the common colour-vision deficiencies can tell apart.
var (
	blue      = color.RGBA{R: 0x00, G: 0x72, B: 0xB2, A: 0xFF}
	vermilion = color.RGBA{R: 0xD5, G: 0x5E, B: 0x00, A: 0xFF}
	green     = color.RGBA{R: 0x00, G: 0x9E, B: 0x73, A: 0xFF}
	purple    = color.RGBA{R: 0xCC, G: 0x79, B: 0xA7, A: 0xFF}
	orange    = color.RGBA{R: 0xE6, G: 0x9F, B: 0x00, A: 0xFF}
	grey      = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xFF}
	dashes    = []vg.Length{vg.Points(5), vg.Points(3)}
)

// Chart draws the goodput curve of res as an SVG image: above, the
// orders accepted a second against those offered, with the knee; below,
// the latency of the accepted orders (pay → converged p50 and p99) and of
// the shed answers (p99); each with the target it is held to. ok is false
// when res reports no per-rate figures. gonum's plot draws it: the charts
// are generated, like the tables, from the committed raw file, and
// regenerating from the same file gives the same bytes.
func Chart(res Result) (svg []byte, ok bool, err error) {
	c, ok := curveOf(res)
	if !ok {
		return nil, false, nil
	}
	top := plot.New()
	top.Title.Text = fmt.Sprintf("%s: goodput by offered rate", baseName(res))
	top.Y.Label.Text = "orders a second"
	top.X.Label.Text = "offered orders a second"
	maxRate := float64(c.rates[len(c.rates)-1])
	offered := plotter.XYs{{X: 0, Y: 0}, {X: maxRate, Y: maxRate}}
	if err := addLine(top, "offered", offered, grey, true, false); err != nil {
		return nil, false, err
	}
	if err := addLine(top, "accepted", c.series("accepted-orders/s"), blue, false, true); err != nil {
		return nil, false, err
	}
	if c.knee > 0 {
		knee := plotter.XYs{{X: c.knee, Y: 0}, {X: c.knee, Y: maxRate}}
		if err := addLine(top, fmt.Sprintf("knee, %s/s", FormatValue(c.knee)), knee, green, true, false); err != nil {
			return nil, false, err
		}
	}
	if target := documentedTargets[[3]string{strings.TrimPrefix(res.Package, modulePrefix), baseName(res), "knee-orders/s"}]; target.value > 0 {
		at := plotter.XYs{{X: target.value, Y: 0}, {X: target.value, Y: maxRate}}
		if err := addLine(top, fmt.Sprintf("target knee %s %s/s", target.op, FormatValue(target.value)), at, orange, true, false); err != nil {
			return nil, false, err
		}
	}
	top.X.Min, top.Y.Min = 0, 0

	bottom := plot.New()
	bottom.Y.Label.Text = "milliseconds"
	bottom.X.Label.Text = "offered orders a second"
	for _, l := range []struct {
		name, column string
		colour       color.Color
	}{
		{"pay → converged p50", "p50-ms", blue},
		{"pay → converged p99", "p99-ms", vermilion},
		{"shed answer p99", "shed-p99-ms", purple},
	} {
		if err := addLine(bottom, l.name, c.series(l.column), l.colour, false, true); err != nil {
			return nil, false, err
		}
	}
	for _, t := range []struct {
		name   string
		ms     float64
		colour color.Color
	}{
		{"target p99 500 ms", 500, vermilion},
		{"target shed p99 50 ms", 50, purple},
	} {
		if err := addLine(bottom, t.name, plotter.XYs{{X: 0, Y: t.ms}, {X: maxRate, Y: t.ms}}, t.colour, true, false); err != nil {
			return nil, false, err
		}
	}
	bottom.X.Min, bottom.Y.Min = 0, 0
	// Headroom above the highest line keeps the legend off the lines.
	bottom.Y.Max *= 1.45
	ticks := []plot.Tick{{Value: 0, Label: "0"}}
	for _, rate := range c.rates {
		ticks = append(ticks, plot.Tick{Value: float64(rate), Label: fmt.Sprint(rate)})
	}
	for _, p := range []*plot.Plot{top, bottom} {
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Millimeter * 2
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Add(plotter.NewGrid())
		for _, style := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
			&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
			style.Font.Variant = "Sans"
		}
	}

	canvas := vgsvg.New(18*vg.Centimeter, 22*vg.Centimeter)
	plots := [][]*plot.Plot{{top}, {bottom}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadY: vg.Millimeter * 6}
	for i, row := range plot.Align(plots, tiles, draw.New(canvas)) {
		plots[i][0].Draw(row[0])
	}
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, false, fmt.Errorf("write the chart of %s: %w", res.Name, err)
	}
	return b.Bytes(), true, nil
}

// series is column's figure at each swept rate that reports it.
func (c curve) series(column string) plotter.XYs {
	var xys plotter.XYs
	for _, rate := range c.rates {
		if v, ok := c.points[rate][column]; ok {
			xys = append(xys, plotter.XY{X: float64(rate), Y: v})
		}
	}
	return xys
}

// addLine adds xys to p as a line, dashed or with its points marked, and
// names it in the legend. A series with no point is left out.
func addLine(p *plot.Plot, name string, xys plotter.XYs, colour color.Color, dashed, marked bool) error {
	if len(xys) == 0 {
		return nil
	}
	line, err := plotter.NewLine(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	line.Color = colour
	line.Width = vg.Points(1.5)
	if dashed {
		line.Dashes = dashes
		line.Width = vg.Points(1)
	}
	p.Add(line)
	if !marked {
		p.Legend.Add(name, line)
		return nil
	}
	points, err := plotter.NewScatter(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	points.Color = colour
	points.Shape = draw.CircleGlyph{}
	p.Add(points)
	p.Legend.Add(name, line, points)
	return nil
}
