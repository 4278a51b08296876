package benchtables_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/tools/dev/internal/benchtables"
)

// repoRoot is the directory of go.work above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

// TestLatestFiguresAreGenerated fails when the generated block of
// docs/benchmarks.md is not what the committed raw files it names give:
// its figures come from a run, never from an edit.
func TestLatestFiguresAreGenerated(t *testing.T) {
	root := repoRoot(t)
	const doc = "docs/benchmarks.md"
	current, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	sources, err := benchtables.Sources(current)
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	for _, s := range sources {
		if !strings.HasPrefix(s, "docs/benchmarks/") {
			t.Errorf("%s names %s: the raw files are kept under docs/benchmarks/", doc, s)
		}
	}
	want, charts, err := benchtables.Regenerate(root, doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(current) {
		t.Errorf("%s: the generated block differs from what %v gives; run `go run ./tools/dev/benchtables` at the repository root (or make bench)",
			doc, sources)
	}
	for _, c := range charts {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(c.Path)))
		if err != nil || string(got) != string(c.Data) {
			t.Errorf("%s: not the chart %v gives (%v); run `go run ./tools/dev/benchtables` at the repository root (or make bench)",
				c.Path, sources, err)
		}
	}
}

const header = `date: 2026-12-01T23:00:00Z
cpu: Test CPU
cores: 2
memory: 24 GiB
go-version: go1.26.8 linux/amd64
kernel: Linux 6.1.0 x86_64
modules: pkg
bench-flags: -run '^$' -bench . -benchtime 1x
`

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    []benchtables.Result
		wantErr string
	}{
		{
			name: "custom and standard metrics, banners and logs around",
			raw: header + `
==================== bench pkg ====================
goos: linux
pkg: github.com/reliable-orders/fulfillment/pkg/outbox
BenchmarkRelay/batch=100-2   	       1	   3000 ns/op	  7603 events/s	  120 B/op	  3 allocs/op
--- BENCH: BenchmarkRelay/batch=100-2
    bench_test.go:10: something
pkg: github.com/reliable-orders/fulfillment/tests/bench
BenchmarkRelay-2   	       1	   22088 events/s	   3.9 ratio
PASS
ok  	github.com/reliable-orders/fulfillment/tests/bench	1.0s
`,
			want: []benchtables.Result{
				{Package: "github.com/reliable-orders/fulfillment/pkg/outbox", Name: "BenchmarkRelay/batch=100-2",
					Metrics: []benchtables.Metric{{3000, "ns/op"}, {7603, "events/s"}, {120, "B/op"}, {3, "allocs/op"}}},
				{Package: "github.com/reliable-orders/fulfillment/tests/bench", Name: "BenchmarkRelay-2",
					Metrics: []benchtables.Metric{{22088, "events/s"}, {3.9, "ratio"}}},
			},
		},
		{
			name:    "malformed benchmark line",
			raw:     header + "BenchmarkRelay-2 1 22088\n",
			wantErr: "missing units",
		},
		{
			name:    "a measurement that is not a number",
			raw:     header + "BenchmarkRelay-2 1 fast events/s\n",
			wantErr: "parsing measurement",
		},
		{
			// As in docs/benchmarks/2026-12-01T2351-make-bench.txt.
			name: "the old sweep table heading, which starts like a result",
			raw:  header + "BenchmarkAPIPayToConverged sweep, 1000 orders per rate × 1 round(s):\nBenchmarkRelay-2 1 5 events/s\n",
			want: []benchtables.Result{{Package: "", Name: "BenchmarkRelay-2", Metrics: []benchtables.Metric{{5, "events/s"}}}},
		},
		{
			name: "a name and a second field that is not a count",
			raw:  header + "BenchmarkRelay-2 batch=100 5 events/s\nBenchmarkRelay-2 1 5 events/s\n",
			want: []benchtables.Result{{Package: "", Name: "BenchmarkRelay-2", Metrics: []benchtables.Metric{{5, "events/s"}}}},
		},
		{
			name: "a name alone, as go test -v prints when a benchmark starts, and with a trailing space",
			raw:  header + "BenchmarkRelay\nBenchmarkRelay \nBenchmarkRelay-2 1 5 events/s\n",
			want: []benchtables.Result{{Package: "", Name: "BenchmarkRelay-2", Metrics: []benchtables.Metric{{5, "events/s"}}}},
		},
		{
			name:    "a broken result after a heading keeps its line number",
			raw:     header + "BenchmarkAPIPayToConverged sweep:\nBenchmarkRelay-2 1 22088\n",
			wantErr: "raw.txt:10: missing units",
		},
		{
			name: "a last line without a newline",
			raw:  header + "BenchmarkRelay-2 1 5 events/s\nBenchmarkAPIPayToConverged sweep",
			want: []benchtables.Result{{Package: "", Name: "BenchmarkRelay-2", Metrics: []benchtables.Metric{{5, "events/s"}}}},
		},
		{
			name:    "no benchmark line",
			raw:     header + "PASS\n",
			wantErr: "no benchmark lines",
		},
		{
			name:    "no date",
			raw:     "pkg: x\nBenchmarkRelay-2 1 5 events/s\n",
			wantErr: "no date: line",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := benchtables.Read(strings.NewReader(tt.raw), "raw.txt")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Results) != len(tt.want) {
				t.Fatalf("results %+v, want %+v", got.Results, tt.want)
			}
			for i, r := range got.Results {
				w := tt.want[i]
				if r.Package != w.Package || r.Name != w.Name || len(r.Metrics) != len(w.Metrics) {
					t.Fatalf("result %d: %+v, want %+v", i, r, w)
				}
				for j := range r.Metrics {
					if r.Metrics[j] != w.Metrics[j] {
						t.Errorf("result %d metric %d: %+v, want %+v", i, j, r.Metrics[j], w.Metrics[j])
					}
				}
			}
			if got.Config["date"] != "2026-12-01T23:00:00Z" || got.Config["cores"] != "2" {
				t.Errorf("config %v", got.Config)
			}
		})
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    []string
		wantNot []string
	}{
		{
			name: "header, link relative to the document, machine",
			raw:  header + "pkg: github.com/reliable-orders/fulfillment/pkg/inbox\nBenchmarkApply/per-event-2 1 596.2 events/s\n",
			want: []string{
				"[`2026-12-01T2300-make-bench.txt`](benchmarks/2026-12-01T2300-make-bench.txt), 2026-12-01T23:00:00Z, Test CPU, 2 cores, 24 GiB memory, go1.26.8 linux/amd64, Linux 6.1.0 x86_64:\n",
				"`go test -run '^$' -bench . -benchtime 1x ./...` in pkg.\n",
				"| `pkg/inbox` | `BenchmarkApply/per-event-2` | 596 events/s |  |\n",
			},
		},
		{
			name: "targets met and missed, ns/op left out",
			raw: header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\n" +
				"BenchmarkRelay-2 1 0 ns/op 22088 events/s 5694 forwarder-100-events/s 3.88 ratio\n" +
				"BenchmarkAPIPayToConverged-2 1 14100 p50-ms 0 errors\n",
			want: []string{
				"| `tests/bench` | `BenchmarkRelay-2` | 22 088 events/s, 5 694 forwarder-100-events/s, 3.88 ratio | events/s ≥ 20 000: met; ratio ≥ 5: missed |\n",
				"| `tests/bench` | `BenchmarkAPIPayToConverged-2` | 14 100 p50-ms, 0 errors | p50-ms ≤ 150: missed; errors = 0: met |\n",
			},
		},
		{
			name: "a sweep: its per-rate figures as a goodput curve, lowest rate first, the knee marked, their targets beside the line",
			raw: header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\n" +
				"BenchmarkAPIPayToConverged-2 1 0 errors 0.95 goodput-at-2x-knee-ratio 200 knee-orders/s " +
				"99.5 rate-200-accepted-% 199 rate-200-accepted-orders/s 0 rate-200-errors 80 rate-200-p50-ms 450 rate-200-p99-ms 0.5 rate-200-shed-% 7 rate-200-shed-p50-ms 12 rate-200-shed-p99-ms " +
				"60 rate-400-accepted-% 240 rate-400-accepted-orders/s 0 rate-400-errors 300 rate-400-p50-ms 900 rate-400-p99-ms 40 rate-400-shed-% 55 rate-400-shed-p99-ms " +
				"25 rate-25-accepted-orders/s 3 rate-25-custom 50 shed-p99-ms\n",
			want: []string{
				"| `tests/bench` | `BenchmarkAPIPayToConverged-2` | 0 errors, 0.95 goodput-at-2x-knee-ratio, 200 knee-orders/s, 3 rate-25-custom, 50 shed-p99-ms | " +
					"errors = 0: met; goodput-at-2x-knee-ratio ≥ 0.9: met; knee-orders/s ≥ 300: missed; rate-200-accepted-% ≥ 99: met; " +
					"rate-200-errors = 0: met; rate-200-p50-ms ≤ 100: met; rate-200-p99-ms ≤ 500: met; shed-p99-ms < 50: missed |\n",
				"\nGoodput curve of `BenchmarkAPIPayToConverged-2` (`tests/bench`), by offered orders a second:\n\n" +
					"| offered/s | accepted/s | accepted % | shed % | p50 ms | p99 ms | shed p50 ms | shed p99 ms | errors |\n" +
					"|---|---|---|---|---|---|---|---|---|\n" +
					"| 25 | 25 |  |  |  |  |  |  |  |\n" +
					"| 200 (knee) | 199 | 99.5 | 0.5 | 80 | 450 | 7 | 12 | 0 |\n" +
					"| 400 | 240 | 60 | 40 | 300 | 900 |  | 55 | 0 |\n" +
					"\n![The goodput curve of BenchmarkAPIPayToConverged: accepted against offered orders a second, and the latency of accepted orders and of shed answers]" +
					"(benchmarks/2026-12-01T2300-make-bench-APIPayToConverged.svg)\n",
			},
		},
		{
			name: "a sweep with no rate within the knee's bounds says so",
			raw: header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\n" +
				"BenchmarkAPIPayToConverged-2 1 0 knee-orders/s 10 rate-50-accepted-orders/s\n",
			want: []string{
				"| `tests/bench` | `BenchmarkAPIPayToConverged-2` | 0 knee-orders/s | knee-orders/s ≥ 300: missed |\n",
				"by offered orders a second; no rate is within the knee's bounds:\n",
				"| 50 | 10 |  |  |  |  |  |  |  |\n",
			},
		},
		{
			name: "an older sweep, without per-rate figures: no curve, and no verdict on the withdrawn p99 ratio",
			raw: header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\n" +
				"BenchmarkAPIPayToConverged-2 1 400 capacity-orders/s 4.91 p99-ratio-200/25 59.1 shed-p99-ms\n",
			want: []string{
				"| `tests/bench` | `BenchmarkAPIPayToConverged-2` | 400 capacity-orders/s, 4.91 p99-ratio-200/25, 59.1 shed-p99-ms | shed-p99-ms < 50: missed |\n",
			},
			wantNot: []string{"Goodput curve", "p99-ratio-200/25 ≤", "!["},
		},
		{
			name: "the commit measured, when the raw file names it",
			raw:  header + "commit: 0123456789ab with uncommitted changes\nBenchmarkRelay-2 1 5 events/s\n",
			want: []string{"Linux 6.1.0 x86_64, code at 0123456789ab with uncommitted changes:\n"},
		},
		{
			name: "standard metrics when there is no custom one",
			raw:  header + "pkg: github.com/reliable-orders/fulfillment/pkg/event\nBenchmarkDecode-2 1000 1234 ns/op 64 B/op 2 allocs/op\n",
			want: []string{"| `pkg/event` | `BenchmarkDecode-2` | 1 234 ns/op, 64 B/op, 2 allocs/op |  |\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := benchtables.Read(strings.NewReader(tt.raw), "docs/benchmarks/2026-12-01T2300-make-bench.txt")
			if err != nil {
				t.Fatal(err)
			}
			got := benchtables.Render("docs", []benchtables.Raw{raw})
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("rendered\n%s\nwant it to contain\n%s", got, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("rendered\n%s\nwant it not to contain\n%s", got, w)
				}
			}
		})
	}
}

// sweepLine is a sweep's benchmark line with its knee and the
// accepted orders a second at 400 offered as given.
func sweepLine(knee, accepted400 string) string {
	return header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\n" +
		"BenchmarkAPIPayToConverged-2 1 " + knee + " knee-orders/s " +
		"100 rate-100-accepted-orders/s 40 rate-100-p50-ms 200 rate-100-p99-ms " +
		accepted400 + " rate-400-accepted-orders/s 300 rate-400-p50-ms 900 rate-400-p99-ms 60 rate-400-shed-p99-ms\n"
}

func TestChart(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantOK  bool
		want    []string
		wantNot []string
	}{
		{
			name:   "a sweep: both panels, the knee and the targets named",
			raw:    sweepLine("100", "240"),
			wantOK: true,
			want: []string{"<svg", "BenchmarkAPIPayToConverged: goodput by offered rate", "offered orders a second",
				"accepted", "knee, 100/s", "target knee ≥ 300/s", "pay → converged p50", "pay → converged p99",
				"shed answer p99", "target p99 500 ms", "target shed p99 50 ms"},
		},
		{
			name:    "no rate within the knee's bounds: no knee line",
			raw:     sweepLine("0", "240"),
			wantOK:  true,
			want:    []string{"accepted", "target knee ≥ 300/s"},
			wantNot: []string{"knee, "},
		},
		{
			name:   "no per-rate figures: no chart",
			raw:    header + "pkg: github.com/reliable-orders/fulfillment/tests/bench\nBenchmarkAPIPayToConverged-2 1 400 capacity-orders/s\n",
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := benchtables.Read(strings.NewReader(tt.raw), "docs/benchmarks/x.txt")
			if err != nil {
				t.Fatal(err)
			}
			svg, ok, err := benchtables.Chart(raw.Results[0])
			if err != nil || ok != tt.wantOK {
				t.Fatalf("Chart: ok %v, error %v; want ok %v", ok, err, tt.wantOK)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(svg), w) {
					t.Errorf("the chart does not contain %q", w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(string(svg), w) {
					t.Errorf("the chart contains %q", w)
				}
			}
		})
	}
}

// TestChartFollowsTheFigures: the same figures give the same bytes (the
// committed chart can be checked), and another figure another chart.
func TestChartFollowsTheFigures(t *testing.T) {
	chart := func(accepted400 string) string {
		t.Helper()
		raw, err := benchtables.Read(strings.NewReader(sweepLine("100", accepted400)), "docs/benchmarks/x.txt")
		if err != nil {
			t.Fatal(err)
		}
		svg, _, err := benchtables.Chart(raw.Results[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(svg)
	}
	first, again := chart("240"), chart("240")
	if first != again {
		t.Error("the same figures gave two different charts")
	}
	if first == chart("120") {
		t.Error("another accepted rate at 400/s gave the same chart")
	}
	if got, want := benchtables.ChartPath("docs/benchmarks/2026-12-01T2300-make-bench.txt", benchtables.Result{Name: "BenchmarkAPIPayToConverged-2"}),
		"docs/benchmarks/2026-12-01T2300-make-bench-APIPayToConverged.svg"; got != want {
		t.Errorf("ChartPath = %s, want %s", got, want)
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{3.88, "3.88"},
		{57.66, "57.7"},
		{99.96, "100"},
		{100, "100"},
		{1234.4, "1 234"},
		{22088, "22 088"},
		{1234567, "1 234 567"},
		{-2500, "-2 500"},
		{0.01234, "0.0123"},
	}
	for _, tt := range tests {
		if got := benchtables.FormatValue(tt.in); got != tt.want {
			t.Errorf("FormatValue(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReplace(t *testing.T) {
	raw, err := benchtables.Read(strings.NewReader(header+"pkg: p\nBenchmarkA-2 1 5 events/s\n"), "docs/benchmarks/new.txt")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		doc     string
		want    []string
		wantErr string
	}{
		{
			name: "replaces the block and its sources, keeps the rest",
			doc:  "# T\n\nbefore\n<!-- benchtables:begin docs/benchmarks/old.txt -->\nold figures\n<!-- benchtables:end -->\nafter\n",
			want: []string{"# T\n\nbefore\n<!-- benchtables:begin docs/benchmarks/new.txt -->\n\nGenerated by", "| `p` | `BenchmarkA-2` | 5 events/s |  |\n\n<!-- benchtables:end -->\nafter\n"},
		},
		{name: "no block", doc: "# T\n", wantErr: "no generated block"},
		{name: "end first", doc: "<!-- benchtables:end -->\n<!-- benchtables:begin x -->\n", wantErr: "before the begin marker"},
		{
			name:    "two blocks",
			doc:     "<!-- benchtables:begin x -->\n<!-- benchtables:end -->\n<!-- benchtables:begin x -->\n<!-- benchtables:end -->\n",
			wantErr: "more than one",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := benchtables.Replace([]byte(tt.doc), []benchtables.Raw{raw}, "docs")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("got\n%s\nwant it to contain\n%q", got, w)
				}
			}
			sources, err := benchtables.Sources(got)
			if err != nil || len(sources) != 1 || sources[0] != "docs/benchmarks/new.txt" {
				t.Errorf("Sources = %v, %v; want [docs/benchmarks/new.txt]", sources, err)
			}
		})
	}
}
