// Command mutate runs gremlins (mutation testing) over the packages whose
// tests guard the suite's rules: pkg/versionguard, pkg/inbox, pkg/outbox and
// every service's internal/domain and internal/app packages. It prints a
// score per package and the surviving mutants, and keeps gremlins' raw
// output with the table in docs/mutation/<UTC start>-make-mutate.txt.
//
// `make mutate` builds and runs it from the repository root
// (docs/testing.md, Mutation testing).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "make mutate:", err)
		os.Exit(1)
	}
}

// Config is what the environment may change; zero fields take the defaults.
type Config struct {
	// Root is the repository root (MUTATE_ROOT, default ".").
	Root string
	// Gremlins is the gremlins binary (GREMLINS, default bin/gremlins).
	Gremlins string
	// Workers is gremlins' --workers (MUTATE_WORKERS, default 1): each
	// worker runs a package's tests, and the machine is shared.
	Workers int
	// TimeoutCoefficient is gremlins' --timeout-coefficient
	// (MUTATE_TIMEOUT_COEFFICIENT, default 5): a mutant's test run may take
	// that many times the run that gathered coverage before it counts as
	// timed out.
	TimeoutCoefficient int
	// Packages restricts the run to these package directories
	// (MUTATE_PACKAGES, space-separated); empty means every target.
	Packages []string
	// OutDir receives the raw output (MUTATE_DIR, default docs/mutation).
	OutDir string
	// MinTimeout is the least time a mutant's test run gets
	// (MUTATE_MIN_TIMEOUT, default 60s): the coefficient is raised for a
	// package whose tests run in a second or two, since a mutant that
	// fails a property test costs its shrinking, and compiling the
	// mutated package, on top.
	MinTimeout time.Duration
}

func configFrom(getenv func(string) string) (Config, error) {
	c := Config{
		Root:               getenv("MUTATE_ROOT"),
		Gremlins:           getenv("GREMLINS"),
		Packages:           strings.Fields(getenv("MUTATE_PACKAGES")),
		OutDir:             getenv("MUTATE_DIR"),
		Workers:            1,
		TimeoutCoefficient: 5,
		MinTimeout:         time.Minute,
	}
	if v := getenv("MUTATE_MIN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("MUTATE_MIN_TIMEOUT=%q: %w", v, err)
		}
		c.MinTimeout = d
	}
	for name, dst := range map[string]*int{"MUTATE_WORKERS": &c.Workers, "MUTATE_TIMEOUT_COEFFICIENT": &c.TimeoutCoefficient} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("%s=%q: %w", name, v, err)
			}
			*dst = n
		}
	}
	if c.Root == "" {
		c.Root = "."
	}
	if c.Gremlins == "" {
		c.Gremlins = filepath.Join(c.Root, "bin", "gremlins")
	}
	if c.OutDir == "" {
		c.OutDir = filepath.Join(c.Root, "docs", "mutation")
	}
	return c, c.Validate()
}

// Validate refuses settings gremlins cannot run with.
func (c Config) Validate() error {
	if c.Workers < 1 || c.TimeoutCoefficient < 1 || c.MinTimeout < 0 {
		return errors.New("MUTATE_WORKERS and MUTATE_TIMEOUT_COEFFICIENT must be at least 1, MUTATE_MIN_TIMEOUT not negative")
	}
	return nil
}

// fixedTargets are the shared packages, fastest first.
var fixedTargets = []string{"pkg/versionguard", "pkg/inbox", "pkg/outbox"}

var services = []string{"order", "payment", "inventory", "points", "notification", "reconciliation"}

// targets lists the package directories (relative to root): the fixed
// ones, then every directory holding non-test Go files under a service's
// internal/domain and internal/app, domains first since they are fast.
func targets(root string) ([]string, error) {
	out := slices.Clone(fixedTargets[:1])
	for _, layer := range []string{"domain", "app"} {
		for _, s := range services {
			base := filepath.Join(root, "services", s, "internal", layer)
			err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
				if errors.Is(err, os.ErrNotExist) {
					return filepath.SkipDir
				}
				if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
					return err
				}
				rel, err := filepath.Rel(root, filepath.Dir(p))
				if err == nil && !slices.Contains(out, rel) {
					out = append(out, rel)
				}
				return err
			})
			if err != nil {
				return nil, err
			}
		}
	}
	return append(out, fixedTargets[1:]...), nil
}

// moduleRoot is the nearest directory at or above dir with a go.mod.
func moduleRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s is in no Go module", dir)
		}
	}
}

// report is the part of gremlins' JSON output (-o) the table needs.
type report struct {
	Efficacy float64 `json:"test_efficacy"`
	Coverage float64 `json:"mutations_coverage"`
	Files    []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

type score struct {
	pkg                                 string
	killed, lived, notCovered, timedOut int
	efficacy, coverage                  float64
	survivors                           []string
	err                                 error
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := configFrom(getenv)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return err
	}
	// gremlins runs in the package's module, so a relative path would miss.
	if cfg.Gremlins, err = filepath.Abs(cfg.Gremlins); err != nil {
		return err
	}
	pkgs := cfg.Packages
	if len(pkgs) == 0 {
		if pkgs, err = targets(root); err != nil {
			return err
		}
	}
	// gremlins copies a package's module to a temporary directory and runs
	// its tests there with the workspace off; the services' go.mod replaces
	// the shared module with ../../pkg, which this link resolves from
	// $TMPDIR/gremlins-*/wd-*.
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Symlink(filepath.Join(root, "pkg"), filepath.Join(tmp, "pkg")); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return err
	}
	start := time.Now().UTC()
	rawPath := filepath.Join(cfg.OutDir, start.Format("2006-01-02T1504")+"-make-mutate.txt")
	raw, err := os.Create(rawPath)
	if err != nil {
		return err
	}
	defer raw.Close()
	out := io.MultiWriter(stdout, raw)
	fmt.Fprintf(raw, "date: %s\ncommit: %s\ngo-version: %s\ngremlins: %s\nworkers: %d\ntimeout-coefficient: %d\nmin-timeout: %s\npackages: %s\n",
		start.Format(time.RFC3339), commit(ctx, root), goVersion(ctx), gremlinsVersion(ctx, cfg.Gremlins),
		cfg.Workers, cfg.TimeoutCoefficient, cfg.MinTimeout, strings.Join(pkgs, " "))

	var scores []score
	for i, p := range pkgs {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(out, "\n==================== mutate %s (%d/%d) ====================\n", p, i+1, len(pkgs))
		began := time.Now()
		s := mutate(ctx, cfg, root, tmp, p, out)
		fmt.Fprintf(out, "-- %s: %s\n", p, time.Since(began).Round(time.Second))
		scores = append(scores, s)
	}
	printTable(out, scores)
	fmt.Fprintf(stdout, "\nraw output: %s\n", rawPath)
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	var failed []string
	for _, s := range scores {
		if s.err != nil {
			failed = append(failed, s.pkg)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("gremlins failed in %s", strings.Join(failed, " "))
	}
	return nil
}

// mutate runs gremlins over one package directory and scores its report.
func mutate(ctx context.Context, cfg Config, root, tmp, pkg string, out io.Writer) score {
	s := score{pkg: pkg}
	dir := filepath.Join(root, pkg)
	mod, err := moduleRoot(dir)
	if err != nil {
		s.err = err
		return s
	}
	// gremlins runs with the workspace off, in a copy of the module; -count=1
	// because a cached coverage run would last a second, and the mutants'
	// timeout is a multiple of it.
	env := append(os.Environ(), "GOWORK=off", "TMPDIR="+tmp, strings.TrimSpace("GOFLAGS=-count=1 "+os.Getenv("GOFLAGS")))
	// A mutant is killed when the tests fail, so they must pass unmutated;
	// their time sets the coefficient that gives a mutant MinTimeout.
	pre := exec.CommandContext(ctx, "go", "test", dir)
	pre.Dir, pre.Env, pre.Stdout, pre.Stderr = mod, env, out, out
	began := time.Now()
	if err := pre.Run(); err != nil {
		s.err = fmt.Errorf("the tests fail unmutated: %w", err)
		return s
	}
	coefficient := max(cfg.TimeoutCoefficient, int(math.Ceil(cfg.MinTimeout.Seconds()/time.Since(began).Seconds())))
	fmt.Fprintf(out, "timeout coefficient %d\n", coefficient)
	jsonPath := filepath.Join(tmp, "report.json")
	cmd := exec.CommandContext(ctx, cfg.Gremlins, "unleash",
		"--workers", strconv.Itoa(cfg.Workers),
		"--timeout-coefficient", strconv.Itoa(coefficient),
		"-o", jsonPath, dir)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = mod, env, out, out
	if s.err = cmd.Run(); s.err != nil {
		if ctx.Err() != nil {
			s.err = errors.New("interrupted")
		}
		fmt.Fprintf(out, "gremlins: %v\n", s.err)
		return s
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		s.err = err
		return s
	}
	var r report
	if s.err = json.Unmarshal(b, &r); s.err != nil {
		return s
	}
	s.efficacy, s.coverage = r.Efficacy, r.Coverage
	for _, f := range r.Files {
		for _, m := range f.Mutations {
			switch m.Status {
			case "KILLED":
				s.killed++
			case "LIVED":
				s.lived++
				s.survivors = append(s.survivors, fmt.Sprintf("%s:%d:%d %s", filepath.Join(pkg, f.Name), m.Line, m.Column, m.Type))
			case "NOT COVERED":
				s.notCovered++
			case "TIMED OUT":
				s.timedOut++
			}
		}
	}
	slices.SortFunc(s.survivors, compareLocations)
	return s
}

// compareLocations orders "file:line:col mutator" by file, then line.
func compareLocations(a, b string) int {
	pa, pb := strings.SplitN(a, ":", 3), strings.SplitN(b, ":", 3)
	if c := strings.Compare(pa[0], pb[0]); c != 0 {
		return c
	}
	la, _ := strconv.Atoi(pa[1])
	lb, _ := strconv.Atoi(pb[1])
	if la != lb {
		return la - lb
	}
	return strings.Compare(a, b)
}

func printTable(w io.Writer, scores []score) {
	fmt.Fprintf(w, "\n==================== mutation scores ====================\n")
	fmt.Fprintf(w, "%-50s %7s %6s %12s %9s %10s %10s\n", "package", "killed", "lived", "not covered", "timed out", "efficacy", "coverage")
	for _, s := range scores {
		if s.err != nil {
			fmt.Fprintf(w, "%-50s FAILED: %v\n", s.pkg, s.err)
			continue
		}
		fmt.Fprintf(w, "%-50s %7d %6d %12d %9d %9.2f%% %9.2f%%\n", s.pkg, s.killed, s.lived, s.notCovered, s.timedOut, s.efficacy, s.coverage)
	}
	fmt.Fprintf(w, "\n==================== survivors (LIVED) ====================\n")
	for _, s := range scores {
		for _, v := range s.survivors {
			fmt.Fprintln(w, v)
		}
	}
}

func commit(ctx context.Context, root string) string {
	rev := output(ctx, root, "git", "rev-parse", "--short=12", "HEAD")
	if exec.CommandContext(ctx, "git", "-C", root, "diff", "--quiet", "HEAD", "--").Run() != nil {
		rev += " with uncommitted changes"
	}
	return rev
}

func goVersion(ctx context.Context) string {
	return output(ctx, "", "go", "env", "GOVERSION")
}

func gremlinsVersion(ctx context.Context, bin string) string {
	v := output(ctx, "", "go", "version", "-m", bin)
	for _, line := range strings.Split(v, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "github.com/go-gremlins/gremlins" {
			return f[1] + " " + f[2]
		}
	}
	return "unknown"
}

func output(ctx context.Context, dir, name string, args ...string) string {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(b))
}
