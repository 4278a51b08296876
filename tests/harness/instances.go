package harness

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Instance is one running process of a service.
type Instance struct {
	// Name is the service's name for its own process, "inventory#2" … for
	// the extra ones Scale starts.
	Name string
	URL  string
	PID  int
}

// extra is one extra instance of a consumer service.
type extra struct {
	name string
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	// ready is set, under the suite's mu, once it has answered /readyz.
	ready bool
}

// readyTimeout bounds the wait for an extra instance's /readyz.
const readyTimeout = 60 * time.Second

// Scale starts or stops extra instances of a consumer service until n of
// its processes run, its own included: the same binary and environment,
// so the same consumer group, each on its own port. New instances are
// ready when it returns; surplus ones are stopped with SIGTERM, the
// highest-numbered first. Unlike the other helpers it returns its error
// instead of failing the test, so a drill may call it from any goroutine;
// calls for one service are serialised, calls for different services run
// side by side. Instances still running when the test ends are stopped
// with the suite.
func (s *Suite) Scale(service string, n int) error {
	lock, ok := s.scaling[service]
	if !ok {
		return fmt.Errorf("scale %s: not a consumer service", service)
	}
	if n < 1 {
		return fmt.Errorf("scale %s to %d: want at least 1", service, n)
	}
	lock.Lock()
	defer lock.Unlock()

	s.mu.Lock()
	current := slices.Clone(s.extras[service])
	s.mu.Unlock()
	for len(current)+1 > n {
		last := current[len(current)-1]
		stopProcess(last.cmd, last.done)
		current = current[:len(current)-1]
		s.mu.Lock()
		s.extras[service] = slices.Clone(current)
		s.mu.Unlock()
	}
	var started []*extra
	free, err := freePorts(max(0, n-len(current)-1))
	if err != nil {
		return err
	}
	for k := len(current) + 2; k <= n; k++ {
		port := free[k-len(current)-2]
		name := fmt.Sprintf("%s#%d", service, k)
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		// os/exec keeps the last of duplicate names, so this HTTP_ADDR wins.
		env := append(slices.Clone(s.env[service]), "HTTP_ADDR="+addr)
		cmd, done, err := s.spawn(name, service, env)
		if err != nil {
			return err
		}
		in := &extra{name: name, url: "http://" + addr, cmd: cmd, done: done}
		started = append(started, in)
		s.mu.Lock()
		s.extras[service] = append(s.extras[service], in)
		s.mu.Unlock()
	}
	var errs []error
	for _, in := range started {
		errs = append(errs, s.waitExtraReady(in))
	}
	return errors.Join(errs...)
}

func (s *Suite) waitExtraReady(in *extra) error {
	client := &http.Client{Timeout: 2 * time.Second}
	ready := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.url+"/readyz", nil)
		if err != nil {
			return false
		}
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	exited := false
	_, ok := waitFor(readyTimeout, func() bool {
		select {
		case <-in.done:
			exited = true
			return true
		default:
		}
		return ready()
	})
	switch {
	case exited:
		return fmt.Errorf("%s exited during start:\n%s", in.name, s.logTail(in.name))
	case !ok:
		return fmt.Errorf("%s not ready within %s", in.name, readyTimeout)
	}
	s.mu.Lock()
	in.ready = true
	s.mu.Unlock()
	return nil
}

// Instances lists the running processes of a service, its own first; an
// extra instance once it is ready.
func (s *Suite) Instances(service string) []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Instance
	if cmd, ok := s.procs[service]; ok && !closed(s.exited[service]) {
		out = append(out, Instance{Name: service, URL: s.urls[service], PID: cmd.Process.Pid})
	}
	for _, in := range s.extras[service] {
		if in.ready && !closed(in.done) {
			out = append(out, Instance{Name: in.name, URL: in.url, PID: in.cmd.Process.Pid})
		}
	}
	return out
}

// DatabaseName is the name of a service's own database in this suite.
func (s *Suite) DatabaseName(service string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dbByService[service]
}

// ServerURL is the Postgres server the suite's databases are on.
func (s *Suite) ServerURL() string { return s.server }

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopProcess ends a process gracefully, killing it after 20 s.
func stopProcess(cmd *exec.Cmd, done chan struct{}) {
	if closed(done) {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// stopExtras stops every extra instance, when the test ends.
func (s *Suite) stopExtras() {
	s.mu.Lock()
	var all []*extra
	for _, list := range s.extras {
		all = append(all, list...)
	}
	s.mu.Unlock()
	for _, in := range all {
		stopProcess(in.cmd, in.done)
	}
}

// logExtras logs the tail of every extra instance's log, for a failed test.
func (s *Suite) logExtras() {
	matches, _ := filepath.Glob(filepath.Join(s.logDir, "*#*.log"))
	for _, m := range matches {
		name := strings.TrimSuffix(filepath.Base(m), ".log")
		if _, err := os.Stat(m); err == nil {
			s.t.Logf("---- %s log (tail) ----\n%s", name, s.logTail(name))
		}
	}
}
