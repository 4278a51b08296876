package supervise_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
)

// buffer is an io.Writer the test can read while children write to it.
type buffer = servicetest.LogBuffer

func sh(name, script string) supervise.Spec {
	return supervise.Spec{Name: name, Path: "/bin/sh", Args: []string{"-c", script}}
}

// A child that stops cleanly on SIGTERM: it says so, and its sleeping child
// (same process group) dies with it. It sleeps in short foreground steps:
// with "sleep 1000 & wait", a SIGTERM arriving just before the shell enters
// wait was only handled when the sleep ended, and the test saw a kill.
const polite = `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.1; done`

func newSupervisor(t *testing.T, out *buffer, grace time.Duration) *supervise.Supervisor {
	t.Helper()
	sup, err := supervise.New(supervise.Config{Output: out, GracePeriod: grace, PrefixWidth: 6})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Stop() })
	return sup
}

func nextExit(t *testing.T, sup *supervise.Supervisor) supervise.Exit {
	t.Helper()
	select {
	case e := <-sup.Exits():
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no exit reported within 10s")
		return supervise.Exit{}
	}
}

func TestPrefixesEveryLine(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   []string
	}{
		{"stdout and stderr", `echo one; echo two >&2; echo three`, []string{"alpha  | one\n", "alpha  | two\n", "alpha  | three\n"}},
		{"last line without newline", `printf 'a\nb'`, []string{"alpha  | a\n", "alpha  | b\n"}},
		{"line written in pieces", `printf 'he'; printf 'llo\n'`, []string{"alpha  | hello\n"}},
		{"crlf", `printf 'dos\r\n'`, []string{"alpha  | dos\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := &buffer{}
			sup := newSupervisor(t, out, time.Second)
			if err := sup.Start(context.Background(), sh("alpha", tt.script)); err != nil {
				t.Fatal(err)
			}
			if e := nextExit(t, sup); e.Name != "alpha" || e.Err != nil {
				t.Fatalf("exit = %v, want alpha with status 0", e)
			}
			got := out.String()
			for _, line := range tt.want {
				if !strings.Contains(got, line) {
					t.Errorf("output lacks %q:\n%s", line, got)
				}
			}
			for _, line := range strings.SplitAfter(strings.TrimSuffix(got, "\n"), "\n") {
				if !strings.HasPrefix(line, "alpha  | ") {
					t.Errorf("line without prefix: %q", line)
				}
			}
		})
	}
}

func TestLinesOfChildrenDoNotInterleave(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, time.Second)
	script := `i=0; while [ $i -lt 200 ]; do echo "line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; i=$((i+1)); done`
	for _, name := range []string{"a", "b", "c"} {
		if err := sup.Start(context.Background(), sh(name, script)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		nextExit(t, sup)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 600 {
		t.Fatalf("got %d lines, want 600", len(lines))
	}
	for _, line := range lines {
		if !strings.HasSuffix(line, "-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") || strings.Count(line, "|") != 1 {
			t.Fatalf("mangled line %q", line)
		}
	}
}

func TestStopIsCleanAndReportsNoExit(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	for _, name := range []string{"alpha", "beta"} {
		if err := sup.Start(context.Background(), sh(name, polite)); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "both children ready", func() bool {
		s := out.String()
		return strings.Contains(s, "alpha  | ready") && strings.Contains(s, "beta   | ready")
	})
	start := time.Now()
	if err := sup.Stop(); err != nil {
		t.Fatalf("Stop() = %v, want a clean stop", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop took %s: the children were not stopped by SIGTERM", took)
	}
	for _, want := range []string{"alpha  | bye", "beta   | bye"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q (SIGTERM not delivered?):\n%s", want, out.String())
		}
	}
	select {
	case e := <-sup.Exits():
		t.Fatalf("a deliberate stop was reported as an exit: %v", e)
	default:
	}
	if err := sup.Start(context.Background(), sh("gamma", polite)); !errors.Is(err, supervise.ErrStopped) {
		t.Errorf("Start after Stop = %v, want ErrStopped", err)
	}
	if err := sup.Stop(); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

func TestStopKillsAChildThatIgnoresSIGTERM(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 200*time.Millisecond)
	if err := sup.Start(context.Background(), sh("stubborn", `trap '' TERM; echo ready; sleep 1000 & wait`)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "child ready", func() bool { return strings.Contains(out.String(), "ready") })
	err := sup.Stop()
	if err == nil || !strings.Contains(err.Error(), "stubborn did not stop") {
		t.Fatalf("Stop() = %v, want a report that stubborn was killed", err)
	}
}

func TestUnexpectedExitIsReported(t *testing.T) {
	tests := []struct {
		name   string
		script string
		code   int
	}{
		{"status 0", `exit 0`, 0},
		{"status 3", `echo failing; exit 3`, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sup := newSupervisor(t, &buffer{}, time.Second)
			if err := sup.Start(context.Background(), sh("crashy", tt.script)); err != nil {
				t.Fatal(err)
			}
			e := nextExit(t, sup)
			if e.Name != "crashy" {
				t.Fatalf("exit of %q, want crashy", e.Name)
			}
			code := 0
			var exitErr *exec.ExitError
			if errors.As(e.Err, &exitErr) {
				code = exitErr.ExitCode()
			} else if e.Err != nil {
				t.Fatalf("unexpected error %v", e.Err)
			}
			if code != tt.code {
				t.Errorf("exit code %d, want %d (%v)", code, tt.code, e)
			}
		})
	}
}

func TestContextEndStopsTheChild(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx, sh("alpha", polite)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "child ready", func() bool { return strings.Contains(out.String(), "ready") })
	cancel()
	poll.Until(t, 10*time.Second, "child stopped by its context", func() bool { return strings.Contains(out.String(), "alpha  | bye") })
	if _, err := sup.RestartWith("alpha", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Restart with an ended context = %v, want context.Canceled", err)
	}
	if err := sup.Stop(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-sup.Exits():
		t.Fatalf("a stop by context was reported as an exit: %v", e)
	default:
	}
}

func TestRestart(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	ctx := context.Background()
	if err := sup.Start(ctx, sh("alpha", polite)); err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(ctx, sh("beta", polite)); err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(ctx, sh("alpha", polite)); err == nil {
		t.Error("starting a running name twice succeeded")
	}
	count := func(s string) int { return strings.Count(out.String(), s) }
	poll.Until(t, 10*time.Second, "first start", func() bool { return count("alpha  | ready") == 1 && count("beta   | ready") == 1 })

	if _, err := sup.RestartWith("alpha", nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "second start", func() bool { return count("alpha  | ready") == 2 })
	if got := count("alpha  | bye"); got != 1 {
		t.Errorf("alpha stopped %d times, want 1", got)
	}
	if got := count("beta   | bye") + count("beta   | ready"); got != 1 {
		t.Errorf("beta was touched by restarting alpha: %d lines", got)
	}
	if _, err := sup.RestartWith("nope", nil); err == nil {
		t.Error("Restart of an unknown name succeeded")
	}
	if err := sup.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := sup.RestartWith("alpha", nil); !errors.Is(err, supervise.ErrStopped) {
		t.Errorf("Restart after Stop = %v, want ErrStopped", err)
	}
	select {
	case e := <-sup.Exits():
		t.Fatalf("a restart was reported as an exit: %v", e)
	default:
	}
}

func TestRestartAfterCrash(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, time.Second)
	if err := sup.Start(context.Background(), sh("alpha", `echo run; exit 1`)); err != nil {
		t.Fatal(err)
	}
	nextExit(t, sup)
	if _, err := sup.RestartWith("alpha", nil); err != nil {
		t.Fatal(err)
	}
	nextExit(t, sup)
	if got := strings.Count(out.String(), "alpha  | run"); got != 2 {
		t.Errorf("ran %d times, want 2", got)
	}
}

func TestConfigAndSpecValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"no output", supervise.Config{}.Validate()},
		{"negative grace", supervise.Config{Output: &buffer{}, GracePeriod: -time.Second}.Validate()},
		{"negative width", supervise.Config{Output: &buffer{}, PrefixWidth: -1}.Validate()},
		{"spec without name", supervise.Spec{Path: "/bin/true"}.Validate()},
		{"spec without path", supervise.Spec{Name: "x"}.Validate()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Error("Validate accepted it")
			}
		})
	}
	if err := (supervise.Config{Output: &buffer{}}).Validate(); err != nil {
		t.Errorf("minimal config rejected: %v", err)
	}
}

func TestStartReportsAMissingProgram(t *testing.T) {
	sup := newSupervisor(t, &buffer{}, time.Second)
	err := sup.Start(context.Background(), supervise.Spec{Name: "ghost", Path: "/nonexistent/ghost-service"})
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("Start = %v, want an error naming ghost", err)
	}
}

func TestColourPrefix(t *testing.T) {
	out := &buffer{}
	sup, err := supervise.New(supervise.Config{Output: out, Colour: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sup.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := sup.Start(context.Background(), sh("c", `echo hi`)); err != nil {
		t.Fatal(err)
	}
	nextExit(t, sup)
	if got, want := out.String(), "\x1b[36mc |\x1b[0m hi\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// RestartWith adds to the environment of one run only: the next Restart is
// back to the Spec's environment. Exit reports say which run ended and with
// which status.
func TestRestartWithEnvironment(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	spec := sh("alpha", `echo "mode=$MODE"; `+polite)
	spec.Env = []string{"PATH=/usr/bin:/bin", "MODE=normal"}
	if err := sup.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { return strings.Count(out.String(), s) }
	poll.Until(t, 10*time.Second, "first start", func() bool { return count("alpha  | ready") == 1 })

	run, err := sup.RestartWith("alpha", []string{"MODE=drill"})
	if err != nil {
		t.Fatal(err)
	}
	if run != 2 {
		t.Errorf("RestartWith returned run %d, want 2", run)
	}
	poll.Until(t, 10*time.Second, "start with the extra variable", func() bool { return count("alpha  | mode=drill") == 1 })

	if _, err := sup.RestartWith("alpha", nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "start with the usual environment", func() bool { return count("alpha  | mode=normal") == 2 })

	if err := sup.Start(context.Background(), sh("beta", `exit 137`)); err != nil {
		t.Fatal(err)
	}
	for want := 1; want <= 2; want++ {
		e := nextExit(t, sup)
		if e.Name != "beta" || e.Run != want || e.Code() != 137 {
			t.Errorf("exit %+v (code %d), want beta run %d with status 137", e, e.Code(), want)
		}
		if want == 1 {
			if _, err := sup.RestartWith("beta", nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := (supervise.Exit{Name: "x"}).Code(); got != 0 {
		t.Errorf("Code of a clean exit = %d, want 0", got)
	}
}

// StopChild takes one child away without reporting an exit and leaves the
// others running; Restart brings it back.
func TestStopChild(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta"} {
		if err := sup.Start(ctx, sh(name, polite)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s string) int { return strings.Count(out.String(), s) }
	poll.Until(t, 10*time.Second, "both started", func() bool { return count("alpha  | ready") == 1 && count("beta   | ready") == 1 })

	if err := sup.StopChild("alpha"); err != nil {
		t.Fatal(err)
	}
	if got := count("alpha  | bye"); got != 1 {
		t.Errorf("alpha stopped %d times, want 1 (gracefully)", got)
	}
	if err := sup.StopChild("alpha"); err != nil {
		t.Errorf("stopping a stopped child again: %v", err)
	}
	if err := sup.StopChild("nope"); err == nil {
		t.Error("StopChild of an unknown name succeeded")
	}
	select {
	case e := <-sup.Exits():
		t.Fatalf("a stop was reported as an exit: %v", e)
	default:
	}
	if got := count("beta   | bye"); got != 0 {
		t.Errorf("beta was stopped with alpha")
	}
	if _, err := sup.RestartWith("alpha", nil); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "alpha started again", func() bool { return count("alpha  | ready") == 2 })
}

// Remove stops one child gracefully without reporting an exit, leaves the
// others running, and frees the name for a new start; PID names the
// running child's process.
func TestRemove(t *testing.T) {
	out := &buffer{}
	sup := newSupervisor(t, out, 10*time.Second)
	defer func() {
		if err := sup.Stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	for _, name := range []string{"alpha", "beta"} {
		if err := sup.Start(ctx, sh(name, polite)); err != nil {
			t.Fatal(err)
		}
	}
	count := func(s string) int { return strings.Count(out.String(), s) }
	poll.Until(t, 10*time.Second, "both started", func() bool { return count("alpha  | ready") == 1 && count("beta   | ready") == 1 })

	pid, ok := sup.PID("alpha")
	if !ok || pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("PID(alpha) = %d, %v: want a live process", pid, ok)
	}
	if err := sup.Remove("alpha"); err != nil {
		t.Fatal(err)
	}
	if got := count("alpha  | bye"); got != 1 {
		t.Errorf("alpha said bye %d times, want 1 (a graceful stop)", got)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("process %d still exists after Remove", pid)
	}
	if _, ok := sup.PID("alpha"); ok {
		t.Error("PID(alpha) still answers after Remove")
	}
	if _, ok := sup.PID("beta"); !ok || count("beta   | bye") != 0 {
		t.Error("stopping alpha touched beta")
	}
	if err := sup.Remove("alpha"); err == nil {
		t.Error("Remove of a removed name succeeded")
	}
	if err := sup.Start(ctx, sh("alpha", polite)); err != nil {
		t.Fatalf("start again after Remove: %v", err)
	}
	poll.Until(t, 10*time.Second, "alpha started again", func() bool { return count("alpha  | ready") == 2 })
	select {
	case e := <-sup.Exits():
		t.Fatalf("Remove was reported as an exit: %v", e)
	default:
	}
}
