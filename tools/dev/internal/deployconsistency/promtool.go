package deployconsistency

import (
	"fmt"
	"os/exec"
	"strings"
)

// PromtoolInstall says how to get promtool where it is missing.
const PromtoolInstall = "install it with `apt-get install prometheus` (the Debian package ships promtool; .ci/run does this when it is missing)"

// PromtoolCheck is one promtool run over deploy/prometheus, from the
// repository root.
type PromtoolCheck struct {
	Name string
	Args []string
}

// PromtoolChecks are the checks `make test` runs: the rules and the
// configuration are valid (check config also loads the rule files it
// names, relative to the configuration), and the alerts' unit tests pass.
var PromtoolChecks = []PromtoolCheck{
	{"alert rules are valid", []string{"check", "rules", "deploy/prometheus/alerts.yml"}},
	{"configuration is valid", []string{"check", "config", "deploy/prometheus/prometheus.yml"}},
	{"alert unit tests pass", []string{"test", "rules", "deploy/prometheus/alerts_test.yml"}},
}

// FindPromtool returns the path of promtool on PATH, or an error that says
// how to install it.
func FindPromtool() (string, error) {
	p, err := exec.LookPath("promtool")
	if err != nil {
		return "", fmt.Errorf("promtool is not on PATH (%w); it checks and unit-tests deploy/prometheus: %s", err, PromtoolInstall)
	}
	return p, nil
}

// RunPromtool runs promtool with args in dir; when it fails, the error
// carries everything it printed.
func RunPromtool(promtool, dir string, args ...string) error {
	cmd := exec.Command(promtool, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("promtool %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
