// Package monitoring_test checks that the alerts and the dashboard under
// deploy/ read metrics the services really export.
package monitoring_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// synthesized are the series Prometheus records for every target itself;
// no service exports them, yet a rule may use them (TargetDown uses up).
var synthesized = map[string]bool{
	"up":                                    true,
	"scrape_duration_seconds":               true,
	"scrape_samples_scraped":                true,
	"scrape_samples_post_metric_relabeling": true,
	"scrape_series_added":                   true,
}

// grafanaIntervals stands in for Grafana's interval variables, which are
// not PromQL, so that a panel using them still parses.
var grafanaIntervals = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// query is one PromQL expression and where it is used.
type query struct {
	where, expr string
}

// ruleQueries returns the expression of every rule of a Prometheus rule file.
func ruleQueries(file string, rules []byte) ([]query, error) {
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rules, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var qs []query
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if strings.TrimSpace(r.Expr) == "" {
				return nil, fmt.Errorf("%s: rule %s of group %s has no expr", file, name, g.Name)
			}
			qs = append(qs, query{where: fmt.Sprintf("%s rule %s", file, name), expr: r.Expr})
		}
	}
	return qs, nil
}

// dashboardPanel is the part of a Grafana panel the test reads; a
// collapsed row holds its panels.
type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// dashboardQueries returns the PromQL of every target of every panel of a
// Grafana dashboard, rows included. (Template variable queries are
// Grafana's own syntax, not PromQL; the dashboard has none.)
func dashboardQueries(file string, dashboard []byte) ([]query, error) {
	var d struct {
		Panels []dashboardPanel `json:"panels"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var qs []query
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					qs = append(qs, query{where: fmt.Sprintf("%s panel %q query %s", file, p.Title, t.RefID), expr: t.Expr})
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return qs, nil
}

// metricNames returns the metric names expr selects, sorted, with the
// PromQL parser Prometheus itself uses. A selector whose name is a regular
// expression cannot be checked and is an error.
func metricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(grafanaIntervals.Replace(expr))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var errs []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			if m.Type != labels.MatchEqual {
				errs = append(errs, fmt.Sprintf("%s selects metric names by a pattern, which cannot be checked", vs))
			} else {
				name = m.Value
			}
		}
		if name != "" {
			seen[name] = true
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// exportedNames returns the series names a /metrics page in the text
// format exports: a family with samples, and for a histogram or summary
// the _bucket, _sum and _count series a query names too.
func exportedNames(page []byte) (map[string]bool, error) {
	text := expfmt.NewTextParser(model.UTF8Validation)
	families, err := text.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		names[name] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	return names, nil
}

// missing returns the used names (name → where used) that are neither
// exported nor recorded by Prometheus itself, sorted.
func missing(used map[string][]string, exported map[string]bool) []string {
	var out []string
	for name := range used {
		if !exported[name] && !synthesized[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    []string
		wantErr string
	}{
		{"a bare selector", "up == 0", []string{"up"}, ""},
		{"labels, aggregation and a threshold", `max without (instance) (consumer_lag_total{group="inventory-service"}) > 1000`, []string{"consumer_lag_total"}, ""},
		{"one name used thrice", `sum without (instance) (increase(c_total[10m])) > 0 or sum without (instance) (c_total unless c_total offset 10m) > 0`, []string{"c_total"}, ""},
		{"two names", `max(a) > 0 and max(deriv(b[10m])) > 0`, []string{"a", "b"}, ""},
		{"a histogram's buckets", `histogram_quantile(0.99, sum by (le) (rate(order_convergence_seconds_bucket[5m])))`, []string{"order_convergence_seconds_bucket"}, ""},
		{"label names and string arguments are not metrics", `count_values("group", sum by (le, group) (x_bucket)) or label_replace(y, "dst", "$1", "src", "(.*)")`, []string{"x_bucket", "y"}, ""},
		{"absent", `absent(orders_unconverged)`, []string{"orders_unconverged"}, ""},
		{"a subquery", `max_over_time(rate(x_total[1m])[10m:1m])`, []string{"x_total"}, ""},
		{"the name as a matcher", `{__name__="foo_total", job="x"}`, []string{"foo_total"}, ""},
		{"Grafana's interval variables", `sum(rate(consumer_messages_total[$__rate_interval])) + sum(increase(z_total[$__range]))`, []string{"consumer_messages_total", "z_total"}, ""},
		{"a number only", `1 + 1`, []string{}, ""},
		{"a name by pattern", `{__name__=~"consumer_.*"}`, nil, "cannot be checked"},
		{"not PromQL", `sum(rate(x[1m])`, nil, "parse error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricNames(tt.expr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("metricNames(%q) = %v, %v; want an error saying %q", tt.expr, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("metricNames(%q) = %v, %v; want %v", tt.expr, got, err, tt.want)
			}
		})
	}
}

func TestQueries(t *testing.T) {
	tests := []struct {
		name    string
		read    func() ([]query, error)
		want    []query
		wantErr string
	}{
		{"every rule of every group", func() ([]query, error) {
			return ruleQueries("a.yml", []byte(`
groups:
  - name: one
    rules:
      - alert: A
        expr: up == 0
      - record: job:x:sum
        expr: sum by (job) (x)
  - name: two
    rules:
      - alert: B
        expr: >-
          y > 1
`))
		}, []query{{"a.yml rule A", "up == 0"}, {"a.yml rule job:x:sum", "sum by (job) (x)"}, {"a.yml rule B", "y > 1"}}, ""},
		{"a rule without expr", func() ([]query, error) {
			return ruleQueries("a.yml", []byte("groups: [{name: g, rules: [{alert: A}]}]"))
		}, nil, "rule A of group g has no expr"},
		{"panels, rows and their panels", func() ([]query, error) {
			return dashboardQueries("d.json", []byte(`{"panels": [
				{"type": "row", "title": "open row", "panels": []},
				{"title": "P1", "targets": [{"refId": "A", "expr": "a"}, {"refId": "B", "expr": "b"}]},
				{"type": "text", "title": "notes"},
				{"type": "row", "title": "collapsed", "panels": [{"title": "P2", "targets": [{"refId": "A", "expr": "c"}, {"refId": "B", "expr": ""}]}]}
			]}`))
		}, []query{{`d.json panel "P1" query A`, "a"}, {`d.json panel "P1" query B`, "b"}, {`d.json panel "P2" query A`, "c"}}, ""},
		{"a dashboard that is not JSON", func() ([]query, error) {
			return dashboardQueries("d.json", []byte(`{"panels": [`))
		}, nil, "d.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.read()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestExportedAndMissing(t *testing.T) {
	page := []byte(`# HELP c_total A counter.
# TYPE c_total counter
c_total{consumer="a"} 1
# HELP g A gauge.
# TYPE g gauge
g 0
# HELP h A histogram.
# TYPE h histogram
h_bucket{le="1"} 0
h_bucket{le="+Inf"} 0
h_sum 0
h_count 0
# HELP s A summary.
# TYPE s summary
s{quantile="0.5"} 0
s_sum 0
s_count 0
# HELP empty A vector that never counted.
# TYPE empty counter
`)
	exported, err := exportedNames(page)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		used []string
		want []string
	}{
		{"counter and gauge", []string{"c_total", "g"}, nil},
		{"a histogram by any of its series", []string{"h", "h_bucket", "h_sum", "h_count"}, nil},
		{"a summary's sum and count", []string{"s", "s_sum", "s_count"}, nil},
		{"a family without samples is not exported", []string{"empty"}, []string{"empty"}},
		{"a counter's name without _total is another name", []string{"c"}, []string{"c"}},
		{"a gauge has no _bucket", []string{"g_bucket"}, []string{"g_bucket"}},
		{"what Prometheus records itself", []string{"up", "scrape_duration_seconds"}, nil},
		{"several missing, sorted", []string{"z", "c_total", "a"}, []string{"a", "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			used := map[string][]string{}
			for _, n := range tt.used {
				used[n] = []string{"test"}
			}
			if got := missing(used, exported); !slices.Equal(got, tt.want) {
				t.Fatalf("missing(%v) = %v, want %v", tt.used, got, tt.want)
			}
		})
	}
}
