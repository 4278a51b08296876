// Package benchtables turns raw `go test -bench` output, as `make bench`
// writes it under docs/benchmarks/, into the Markdown tables of a
// document's generated block, so every figure in the document comes from a
// committed raw file and nobody types one by hand.
//
// The block sits between two marker comments; the begin marker names the
// raw files, relative to the repository root, it was generated from:
//
//	<!-- benchtables:begin docs/benchmarks/2026-12-01T2300-make-bench.txt -->
//	...generated...
//	<!-- benchtables:end -->
//
// Each raw file gives one table: its date, machine and command (the
// `date:`, `cpu:`, `cores:`, `memory:`, `go-version:`, `kernel:`, `modules:` and
// `bench-flags:` lines make bench writes first), then one row per benchmark line with its package, its
// name, every custom metric with its unit and, where the documentation sets
// one, the target and whether the figure meets it. A sweep's per-rate
// metrics (rate-200-p99-ms) are its goodput curve instead: a table after
// the file's, one row per offered rate.
package benchtables

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// Marker comments around the generated block.
const (
	BeginMarker = "<!-- benchtables:begin"
	EndMarker   = "<!-- benchtables:end -->"
)

// modulePrefix is left out of package paths in the tables.
const modulePrefix = "github.com/reliable-orders/fulfillment/"

// standardUnits are the metrics go test reports itself. They are shown
// only for a line without any custom metric: on the suite's benchmarks one
// op is a whole run, and -benchmem's counts are not what they measure.
var standardUnits = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

// Raw is one raw benchmark output file.
type Raw struct {
	// File is the path the file was read from, slash-separated.
	File string
	// Config holds the file configuration lines (date, cpu, cores,
	// memory, go-version, kernel, modules, bench-flags, goos, goarch) as of the
	// first result.
	Config map[string]string
	// Results are the benchmark lines, in order.
	Results []Result
}

// Result is one benchmark line.
type Result struct {
	// Package is the import path of the benchmark's package.
	Package string
	// Name is the full name, "Benchmark" included, e.g.
	// BenchmarkRelay/batch=100-2.
	Name string
	// Metrics are the line's value and unit pairs, in the line's order.
	Metrics []Metric
}

// Metric is one value and its unit, as go test printed them.
type Metric struct {
	Value float64
	Unit  string
}

// Read parses raw `go test -bench` output. A malformed benchmark line is
// an error: a figure the tables cannot read must not silently vanish. A
// line that starts with "Benchmark" but has no iteration count after the
// name is not a benchmark line and is skipped (see dropNonResults).
func Read(r io.Reader, file string) (Raw, error) {
	raw := Raw{File: file}
	in, err := io.ReadAll(r)
	if err != nil {
		return Raw{}, fmt.Errorf("read %s: %w", file, err)
	}
	br := benchfmt.NewReader(bytes.NewReader(dropNonResults(in)), file)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			return Raw{}, fmt.Errorf("read %s: %w", file, rec)
		case *benchfmt.Result:
			if raw.Config == nil {
				raw.Config = map[string]string{}
				for _, c := range rec.Config {
					if c.File {
						raw.Config[c.Key] = string(c.Value)
					}
				}
			}
			res := Result{Package: rec.GetConfig("pkg"), Name: "Benchmark" + rec.Name.String()}
			for _, v := range rec.Values {
				m := Metric{Value: v.Value, Unit: v.Unit}
				if v.OrigUnit != "" {
					m = Metric{Value: v.OrigValue, Unit: v.OrigUnit}
				}
				res.Metrics = append(res.Metrics, m)
			}
			raw.Results = append(raw.Results, res)
		}
	}
	if err := br.Err(); err != nil {
		return Raw{}, fmt.Errorf("read %s: %w", file, err)
	}
	if len(raw.Results) == 0 {
		return Raw{}, fmt.Errorf("read %s: no benchmark lines", file)
	}
	if raw.Config["date"] == "" {
		return Raw{}, fmt.Errorf("read %s: no date: line before the first benchmark line (make bench writes one)", file)
	}
	return raw, nil
}

// dropNonResults blanks each line that starts with "Benchmark" but whose
// second field is not an iteration count, so benchfmt ignores it as it
// ignores any other text, and the line numbers in its errors stay those of
// the file. benchfmt reports every line starting with "Benchmark" that does
// not parse as a result, yet such a line is text a benchmark printed, not a
// broken result: the committed raw file
// docs/benchmarks/2026-12-01T2351-make-bench.txt still holds
// BenchmarkAPIPayToConverged's old sweep table heading
// ("BenchmarkAPIPayToConverged sweep, 1000 orders per rate ..."), and raw
// files are not edited after a run. Deciding by the line's shape rather than
// by the wording of benchfmt's error keeps a result line that has its count
// but is broken after it (a value without a unit, say) an error.
func dropNonResults(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for line := range bytes.Lines(in) {
		if !countless(line) {
			out = append(out, line...)
		} else if bytes.HasSuffix(line, []byte("\n")) {
			out = append(out, '\n')
		}
	}
	return out
}

// countless reports whether line starts like a benchmark result but has no
// iteration count as its second field.
func countless(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("Benchmark")) {
		return false
	}
	fields := bytes.Fields(line)
	if len(fields) < 2 {
		return true
	}
	_, err := strconv.Atoi(string(fields[1]))
	return err != nil
}

// ReadFile reads the raw file at name, relative to root.
func ReadFile(root, name string) (Raw, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return Raw{}, fmt.Errorf("open raw benchmark output: %w", err)
	}
	defer f.Close()
	return Read(f, filepath.ToSlash(name))
}

// Render returns the generated block's content for raws, linking each raw
// file relative to docDir (the document's directory, slash-separated,
// relative to the root the raw files' names are relative to).
func Render(docDir string, raws []Raw) string {
	var b strings.Builder
	b.WriteString("Generated by `go run ./tools/dev/benchtables` (the last step of `make bench`)\n")
	b.WriteString("from the raw output named below; `make test` fails when this block differs\n")
	b.WriteString("from what it generates, so change the figures by running the benchmarks.\n")
	for _, raw := range raws {
		fmt.Fprintf(&b, "\n[`%s`](%s), %s", path.Base(raw.File), relative(docDir, raw.File), raw.Config["date"])
		if m := machine(raw.Config); m != "" {
			fmt.Fprintf(&b, ", %s", m)
		}
		if c := strings.TrimSpace(raw.Config["commit"]); c != "" {
			fmt.Fprintf(&b, ", code at %s", c)
		}
		b.WriteString(":\n")
		if flags := raw.Config["bench-flags"]; flags != "" {
			fmt.Fprintf(&b, "`go test %s ./...` in %s", flags, raw.Config["modules"])
			if env := strings.TrimSpace(raw.Config["bench-env"]); env != "" {
				fmt.Fprintf(&b, ", with `%s`", env)
			}
			b.WriteString(".\n")
		}
		b.WriteString("\n| package | benchmark | figures | target |\n|---|---|---|---|\n")
		for _, res := range raw.Results {
			fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s |\n", cell(strings.TrimPrefix(res.Package, modulePrefix)),
				cell(res.Name), cell(figures(res)), cell(targets(res)))
		}
		for _, res := range raw.Results {
			writeCurve(&b, docDir, raw.File, res)
		}
	}
	return b.String()
}

// curveColumns are the figures of one offered rate a sweep reports, each
// as a metric whose unit is "rate-<offered>-" and the column's unit
// (rate-200-p99-ms), with the heading the curve's table gives them.
var curveColumns = []struct{ unit, heading string }{
	{"accepted-orders/s", "accepted/s"},
	{"accepted-%", "accepted %"},
	{"shed-%", "shed %"},
	{"p50-ms", "p50 ms"},
	{"p99-ms", "p99 ms"},
	{"shed-p50-ms", "shed p50 ms"},
	{"shed-p99-ms", "shed p99 ms"},
	{"errors", "errors"},
}

// curveUnit splits a per-rate unit, rate-200-p99-ms, into its offered rate
// and its column's unit; ok is false for any other unit, one whose column
// is not in curveColumns included, which then stays among the figures.
func curveUnit(unit string) (rate int, column string, ok bool) {
	rest, found := strings.CutPrefix(unit, "rate-")
	if !found {
		return 0, "", false
	}
	digits, column, found := strings.Cut(rest, "-")
	if !found || !slices.ContainsFunc(curveColumns, func(c struct{ unit, heading string }) bool { return c.unit == column }) {
		return 0, "", false
	}
	rate, err := strconv.Atoi(digits)
	if err != nil || rate < 1 {
		return 0, "", false
	}
	return rate, column, true
}

// writeCurve writes the goodput curve of res, a result of the raw file
// rawFile, when it reports per-rate figures: one row per offered rate,
// lowest first, the knee marked, then its chart (Chart, at ChartPath),
// linked relative to docDir.
func writeCurve(b *strings.Builder, docDir, rawFile string, res Result) {
	c, ok := curveOf(res)
	if !ok {
		return
	}
	fmt.Fprintf(b, "\nGoodput curve of `%s` (`%s`), by offered orders a second", cell(res.Name), cell(strings.TrimPrefix(res.Package, modulePrefix)))
	if c.knee == 0 {
		b.WriteString("; no rate is within the knee's bounds")
	}
	b.WriteString(":\n\n| offered/s |")
	for _, col := range curveColumns {
		fmt.Fprintf(b, " %s |", col.heading)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(curveColumns)) + "\n")
	for _, rate := range c.rates {
		fmt.Fprintf(b, "| %d", rate)
		if float64(rate) == c.knee {
			b.WriteString(" (knee)")
		}
		b.WriteString(" |")
		for _, col := range curveColumns {
			if v, ok := c.points[rate][col.unit]; ok {
				fmt.Fprintf(b, " %s |", FormatValue(v))
			} else {
				b.WriteString("  |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n![The goodput curve of %s: accepted against offered orders a second, and the latency of accepted orders and of shed answers](%s)\n",
		baseName(res), relative(docDir, ChartPath(rawFile, res)))
}

// machine describes where the run happened, from the config lines.
func machine(cfg map[string]string) string {
	var parts []string
	for _, k := range []struct{ key, format string }{
		{"cpu", "%s"}, {"cores", "%s cores"}, {"memory", "%s memory"}, {"go-version", "%s"}, {"kernel", "%s"},
	} {
		if v := strings.TrimSpace(cfg[k.key]); v != "" {
			parts = append(parts, fmt.Sprintf(k.format, v))
		}
	}
	return strings.Join(parts, ", ")
}

// figures lists a line's custom metrics, or its standard ones when it has
// none. The per-rate figures of a sweep are left to its curve's table.
func figures(res Result) string {
	var custom, standard []string
	for _, m := range res.Metrics {
		if _, _, ok := curveUnit(m.Unit); ok {
			continue
		}
		s := FormatValue(m.Value) + " " + m.Unit
		if standardUnits[m.Unit] {
			standard = append(standard, s)
		} else {
			custom = append(custom, s)
		}
	}
	if len(custom) == 0 {
		return strings.Join(standard, ", ")
	}
	return strings.Join(custom, ", ")
}

// target is a figure the documentation asks of a metric.
type target struct {
	op    string // "≥", "≤", "<" or "="
	value float64
}

func (t target) met(v float64) bool {
	switch t.op {
	case "≥":
		return v >= t.value
	case "≤":
		return v <= t.value
	case "<":
		return v < t.value
	default:
		return v == t.value
	}
}

// documentedTargets are the targets docs/benchmarks.md gives, by package
// (without the module prefix), base benchmark name and unit.
var documentedTargets = map[[3]string]target{
	{"tests/bench", "BenchmarkRelay", "events/s"}:                                {"≥", 20_000},
	{"tests/bench", "BenchmarkRelay", "ratio"}:                                   {"≥", 5},
	{"tests/bench", "BenchmarkAPIPayToConverged", "p50-ms"}:                      {"≤", 150},
	{"tests/bench", "BenchmarkAPIPayToConverged", "p99-ms"}:                      {"≤", 1_000},
	{"tests/bench", "BenchmarkAPIPayToConverged", "errors"}:                      {"=", 0},
	{"tests/bench", "BenchmarkAPIPayToConverged", "shed-p99-ms"}:                 {"<", 50},
	{"tests/bench", "BenchmarkAPIPayToConverged", "half-done"}:                   {"=", 0},
	{"tests/bench", "BenchmarkAPIPayToConverged", "rate-200-accepted-%"}:         {"≥", 99},
	{"tests/bench", "BenchmarkAPIPayToConverged", "rate-200-p50-ms"}:             {"≤", 100},
	{"tests/bench", "BenchmarkAPIPayToConverged", "rate-200-p99-ms"}:             {"≤", 500},
	{"tests/bench", "BenchmarkAPIPayToConverged", "rate-200-errors"}:             {"=", 0},
	{"tests/bench", "BenchmarkAPIPayToConverged", "knee-orders/s"}:               {"≥", 300},
	{"tests/bench", "BenchmarkAPIPayToConverged", "goodput-at-2x-knee-ratio"}:    {"≥", 0.9},
	{"tests/bench", "BenchmarkAPIPayToConverged", "goodput-past-knee-min-ratio"}: {"≥", 0.9},
	{"tests/bench", "BenchmarkConsumers", "ratio"}:                               {"≥", 8},
	{"tests/bench", "BenchmarkBacklog", "drain-s"}:                               {"≤", 15},
	{"tests/bench", "BenchmarkBacklog", "peak-rss-MiB"}:                          {"≤", 100},
	{"tests/bench", "BenchmarkReconciliation", "findings"}:                       {"=", 100},
	{"tests/bench", "BenchmarkReconciliation", "actions"}:                        {"=", 100},
	{"tests/bench", "BenchmarkReconciliation", "second-actions"}:                 {"=", 0},
	{"scripts/internal/loadgen", "BenchmarkBrokerPublish", "ratio"}:              {"≥", 0.5},
	{"tests/bench", "BenchmarkLimits", "inventory-ratio"}:                        {"≥", 0.5},
	{"tests/bench", "BenchmarkLimits", "points-ratio"}:                           {"≥", 0.5},
	{"tests/bench", "BenchmarkLimits", "notification-ratio"}:                     {"≥", 0.5},
	{"tests/bench", "BenchmarkLimits", "overlap-ratio"}:                          {"≤", 1.5},
	{"tests/bench", "BenchmarkLimits", "inventory-peak-rss-MiB"}:                 {"≤", 100},
	{"tests/bench", "BenchmarkLimits", "points-peak-rss-MiB"}:                    {"≤", 100},
	{"tests/bench", "BenchmarkLimits", "notification-peak-rss-MiB"}:              {"≤", 100},
}

// targets lists the documented targets of a line's metrics, each with
// whether the figure meets it.
func targets(res Result) string {
	pkg := strings.TrimPrefix(res.Package, modulePrefix)
	base := baseName(res)
	var out []string
	for _, m := range res.Metrics {
		t, ok := documentedTargets[[3]string{pkg, base, m.Unit}]
		if !ok {
			continue
		}
		verdict := "missed"
		if t.met(m.Value) {
			verdict = "met"
		}
		out = append(out, fmt.Sprintf("%s %s %s: %s", m.Unit, t.op, FormatValue(t.value), verdict))
	}
	return strings.Join(out, "; ")
}

// baseName is res's name without its sub-benchmarks and GOMAXPROCS:
// BenchmarkRelay for BenchmarkRelay/batch=100-2.
func baseName(res Result) string {
	return "Benchmark" + string(benchfmt.Name(strings.TrimPrefix(res.Name, "Benchmark")).Base())
}

// relative is name, relative to the root, as a link from docDir.
func relative(docDir, name string) string {
	if rel, err := filepath.Rel(filepath.FromSlash(docDir), filepath.FromSlash(name)); err == nil {
		return filepath.ToSlash(rel)
	}
	return name
}

// cell keeps a value from ending its table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// FormatValue prints a figure as the documents do: whole numbers from 100
// up, with a space between thousands; three significant digits below.
func FormatValue(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	if math.Abs(v) < 100 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	digits := strconv.FormatFloat(math.Abs(math.Round(v)), 'f', 0, 64)
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
	}
	for i, r := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Sources returns the raw files the begin marker of doc names.
func Sources(doc []byte) ([]string, error) {
	begin, _, err := block(doc)
	if err != nil {
		return nil, err
	}
	line := doc[begin:]
	line = line[:bytes.IndexByte(line, '\n')]
	names := strings.Fields(strings.TrimSuffix(strings.TrimPrefix(string(line), BeginMarker), "-->"))
	if len(names) == 0 {
		return nil, errors.New("the begin marker names no raw benchmark output")
	}
	return names, nil
}

// Regenerate returns the document at docPath (relative to root) with its
// generated block rebuilt from sources, or, when sources is empty, from
// the raw files its begin marker already names, and the charts the block
// links (Charts).
func Regenerate(root, docPath string, sources []string) ([]byte, []File, error) {
	doc, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(docPath)))
	if err != nil {
		return nil, nil, fmt.Errorf("read the document: %w", err)
	}
	if len(sources) == 0 {
		if sources, err = Sources(doc); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", docPath, err)
		}
	}
	raws := make([]Raw, len(sources))
	for i, s := range sources {
		if raws[i], err = ReadFile(root, filepath.ToSlash(s)); err != nil {
			return nil, nil, err
		}
	}
	out, err := Replace(doc, raws, path.Dir(filepath.ToSlash(docPath)))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", docPath, err)
	}
	charts, err := Charts(raws)
	if err != nil {
		return nil, nil, err
	}
	return out, charts, nil
}

// Charts returns the chart of every result of raws that reports per-rate
// figures, each at its ChartPath.
func Charts(raws []Raw) ([]File, error) {
	var files []File
	for _, raw := range raws {
		for _, res := range raw.Results {
			svg, ok, err := Chart(res)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", raw.File, err)
			}
			if ok {
				files = append(files, File{Path: ChartPath(raw.File, res), Data: svg})
			}
		}
	}
	return files, nil
}

// Replace returns doc with the content of its generated block, and the
// raw files its begin marker names, replaced by those of raws.
func Replace(doc []byte, raws []Raw, docDir string) ([]byte, error) {
	begin, end, err := block(doc)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(raws))
	for i, r := range raws {
		names[i] = r.File
	}
	var out bytes.Buffer
	out.Write(doc[:begin])
	fmt.Fprintf(&out, "%s %s -->\n\n", BeginMarker, strings.Join(names, " "))
	out.WriteString(Render(docDir, raws))
	out.WriteString("\n")
	out.Write(doc[end:])
	return out.Bytes(), nil
}

// block finds the generated block: the offset of the begin marker's line
// and that of the end marker.
func block(doc []byte) (begin, end int, err error) {
	begin = bytes.Index(doc, []byte(BeginMarker))
	end = bytes.Index(doc, []byte(EndMarker))
	switch {
	case begin < 0 || end < 0:
		return 0, 0, fmt.Errorf("no generated block: want a line starting %q and one %q", BeginMarker, EndMarker)
	case end < begin:
		return 0, 0, errors.New("the end marker comes before the begin marker")
	case bytes.Count(doc, []byte(BeginMarker)) > 1 || bytes.Count(doc, []byte(EndMarker)) > 1:
		return 0, 0, errors.New("more than one generated block")
	case begin > 0 && doc[begin-1] != '\n':
		return 0, 0, errors.New("the begin marker does not start a line")
	case !bytes.Contains(doc[begin:end], []byte("\n")):
		return 0, 0, errors.New("the begin marker's line has no end before the end marker")
	}
	return begin, end, nil
}
