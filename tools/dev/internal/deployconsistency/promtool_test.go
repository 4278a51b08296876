package deployconsistency_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/tools/dev/internal/deployconsistency"
)

// promtool fails the test, never skips it, when promtool is missing: the
// alerts would otherwise go untested without anyone noticing.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := deployconsistency.FindPromtool()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPromtool validates the rules and the configuration and runs the
// alerts' unit tests (deploy/prometheus/alerts_test.yml).
func TestPromtool(t *testing.T) {
	bin, root := promtool(t), repoRoot(t)
	for _, c := range deployconsistency.PromtoolChecks {
		t.Run(c.Name, func(t *testing.T) {
			if err := deployconsistency.RunPromtool(bin, root, c.Args...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestPromtoolCatchesBrokenRules breaks a copy of deploy/prometheus and
// expects the same checks to fail, saying what broke.
func TestPromtoolCatchesBrokenRules(t *testing.T) {
	t.Parallel()
	bin, root := promtool(t), repoRoot(t)
	tests := []struct {
		name     string
		file     string // in deploy/prometheus
		old, new string
		check    int // index in PromtoolChecks
		want     string
	}{
		{"a rule that does not parse", "alerts.yml", "expr: up == 0", "expr: up == ", 0, "alerts.yml"},
		{"a rule file the configuration cannot find", "prometheus.yml", "  - alerts.yml", "  - missing.yml", 1, "missing.yml"},
		{"a threshold the unit tests do not expect", "alerts.yml", "(consumer_lag_total) > 1000", "(consumer_lag_total) > 10000", 2, "ConsumerLagGrowing"},
		{"the first dead letter missed", "alerts.yml",
			"          or\n          sum without (instance) (consumer_dead_letters_total unless consumer_dead_letters_total offset 10m) > 0\n", "", 2,
			"ConsumerDeadLetters fires for the first dead letter of a consumer"},
		{"an annotation that no longer says where to look", "alerts.yml", "`make dlq` lists them", "the DLQ lists them", 2, "ConsumerDeadLetters"},
		{"an alert without its `for`", "alerts.yml", "expr: max without (instance) (orders_unconverged) > 0\n        for: 1m\n",
			"expr: max without (instance) (orders_unconverged) > 0\n", 2, "OrdersUnconverged ignores a count that clears within the minute"},
		{"a down target alerted at once", "alerts.yml", "expr: up == 0\n        for: 1m\n", "expr: up == 0\n", 2, "TargetDown fires for a target down a minute, not for a blip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "deploy", "prometheus")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"prometheus.yml", "alerts.yml", "alerts_test.yml"} {
				data, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", name))
				if err != nil {
					t.Fatal(err)
				}
				if name == tt.file {
					if !strings.Contains(string(data), tt.old) {
						t.Fatalf("%s does not contain %q: update the test", name, tt.old)
					}
					data = []byte(strings.Replace(string(data), tt.old, tt.new, 1))
				}
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := deployconsistency.PromtoolChecks[tt.check]
			err := deployconsistency.RunPromtool(bin, filepath.Dir(filepath.Dir(dir)), c.Args...)
			if err == nil {
				t.Fatalf("promtool %s passed on the broken copy", strings.Join(c.Args, " "))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("promtool failed without saying %q:\n%v", tt.want, err)
			}
		})
	}
}

func TestFindPromtool(t *testing.T) {
	stub := t.TempDir()
	if err := os.WriteFile(filepath.Join(stub, "promtool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		want    string // the path found; empty: an error
		wantErr string
	}{
		{"on PATH", stub, filepath.Join(stub, "promtool"), ""},
		{"missing", t.TempDir(), "", "apt-get install prometheus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			got, err := deployconsistency.FindPromtool()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one that says %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FindPromtool() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
