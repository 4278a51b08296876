// Package supervise runs named child processes for the developer runner:
// it prefixes every line they print with their name, reports the ones that
// exit on their own, restarts one by name, and stops them all with SIGTERM,
// then SIGKILL after a grace period.
//
// Each child runs in its own process group, so a Ctrl-C in the terminal
// reaches only the runner, which then stops the children in order, and a
// signal reaches whatever the child started too.
package supervise

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrStopped is returned by Start and Restart after Stop.
var ErrStopped = errors.New("supervisor stopped")

// Config says where output goes and how long a child gets to stop.
type Config struct {
	// Output receives the children's lines, each prefixed with the child's
	// name and written in one Write call. Share it with other writers through
	// a SyncWriter so lines never interleave.
	Output io.Writer
	// GracePeriod is how long a child has between SIGTERM and SIGKILL.
	GracePeriod time.Duration
	// PrefixWidth pads names to this many characters so lines align.
	PrefixWidth int
	// Colour puts each child's prefix in its own ANSI colour.
	Colour bool
}

// DefaultGracePeriod is the grace period when Config leaves it zero.
const DefaultGracePeriod = 10 * time.Second

func (c Config) withDefaults() Config {
	c.GracePeriod = cmp.Or(c.GracePeriod, DefaultGracePeriod)
	return c
}

// Validate reports a configuration the supervisor cannot work with.
func (c Config) Validate() error {
	if c.Output == nil {
		return errors.New("supervise: Output is required")
	}
	if c.GracePeriod < 0 {
		return fmt.Errorf("supervise: negative grace period %s", c.GracePeriod)
	}
	if c.PrefixWidth < 0 {
		return fmt.Errorf("supervise: negative prefix width %d", c.PrefixWidth)
	}
	return nil
}

// Spec is one child process.
type Spec struct {
	// Name identifies the child in output, in Exit and for Restart.
	Name string
	// Path is the program to run.
	Path string
	// Args are its arguments, without the program name.
	Args []string
	// Env is its whole environment; nil inherits the supervisor's.
	Env []string
	// Dir is its working directory; empty means the supervisor's.
	Dir string
}

// Validate reports a Spec that cannot be started.
func (s Spec) Validate() error {
	if s.Name == "" {
		return errors.New("supervise: a child needs a name")
	}
	if s.Path == "" {
		return fmt.Errorf("supervise: %s: no program to run", s.Name)
	}
	return nil
}

// Exit reports a child that exited although nobody asked it to stop.
type Exit struct {
	// Name is the child's name.
	Name string
	// Run says which start of Name exited: 1 for the first, one more for
	// each Start or Restart after it. A report whose Run is older than the
	// latest start of Name is about a child that has been replaced.
	Run int
	// Err is what waiting for it returned: nil for exit status 0, an
	// *exec.ExitError otherwise.
	Err error
}

// Code is the child's exit status: 0 for success, -1 when it was ended by
// a signal.
func (e Exit) Code() int {
	if e.Err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if errors.As(e.Err, &exitErr) {
		return exitErr.ExitCode()
	}
	return -1
}

// String says which child exited and how.
func (e Exit) String() string {
	if e.Err == nil {
		return e.Name + " exited with status 0"
	}
	return fmt.Sprintf("%s exited: %v", e.Name, e.Err)
}

// Supervisor owns a set of running children. Its methods are safe for
// concurrent use. Every goroutine it starts has ended when Stop returns.
type Supervisor struct {
	cfg     Config
	out     *SyncWriter
	exits   chan Exit
	closed  chan struct{} // closed by Stop
	wg      sync.WaitGroup
	mu      sync.Mutex
	procs   map[string]*process
	runs    map[string]int // starts per name
	colours map[string]string
	stopped bool
}

type process struct {
	spec   Spec
	run    int // which start of spec.Name this is
	pid    int
	parent context.Context // what Start was given; Restart reuses it
	cancel context.CancelFunc
	done   chan struct{} // closed once the process has been waited for
	killed bool          // set before done is closed
}

// New returns a supervisor with no children.
func New(cfg Config) (*Supervisor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	out, ok := cfg.Output.(*SyncWriter)
	if !ok {
		out = NewSyncWriter(cfg.Output)
	}
	return &Supervisor{
		cfg:     cfg,
		out:     out,
		exits:   make(chan Exit),
		closed:  make(chan struct{}),
		procs:   map[string]*process{},
		runs:    map[string]int{},
		colours: map[string]string{},
	}, nil
}

// Exits delivers every child that exits without having been asked to
// (by Stop, Restart or the end of the context it was started with). Nobody
// needs to read it: a pending report is dropped by Stop.
func (s *Supervisor) Exits() <-chan Exit { return s.exits }

// Start starts a child. It is stopped (SIGTERM, then SIGKILL after the grace
// period) when ctx ends, by Restart, or by Stop. A name can be started again
// once its previous child has exited.
func (s *Supervisor) Start(ctx context.Context, spec Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if p, ok := s.procs[spec.Name]; ok && !p.exited() {
		return fmt.Errorf("supervise: %s is already running", spec.Name)
	}
	_, err := s.startLocked(ctx, spec, nil)
	return err
}

// RestartWith stops the named child, waits for it and starts it again with
// the same Spec and context, and env added to the Spec's environment for
// this run only (an entry wins over one of the same name in the Spec), so a
// crash drill can start a service with a fail point armed and a later
// restart without env brings back its usual environment. It also starts
// again a child that has exited. It returns the new child's Run number.
func (s *Supervisor) RestartWith(name string, env []string) (int, error) {
	p, err := s.halt(name, false)
	if p == nil {
		return 0, err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return 0, ErrStopped
	case s.procs[name] != p:
		return 0, fmt.Errorf("supervise: %s was started again meanwhile", name)
	}
	if err := p.parent.Err(); err != nil {
		return 0, fmt.Errorf("supervise: restart %s: %w", name, err)
	}
	return s.startLocked(p.parent, p.spec, env)
}

// StopChild stops the named child (SIGTERM, then SIGKILL after the grace
// period) and waits for it. Its end is not reported on Exits, since it was
// asked for, and it stays down until Restart or RestartWith starts it
// again: an outage drill takes a service away this way. Stopping a child
// that has already exited does nothing.
func (s *Supervisor) StopChild(name string) error {
	_, err := s.halt(name, false)
	return err
}

// halt stops the named child and waits for it, forgetting it when forget
// is set; it returns the child, nil when there was none to stop.
func (s *Supervisor) halt(name string, forget bool) (*process, error) {
	s.mu.Lock()
	p, ok := s.procs[name]
	stopped := s.stopped
	s.mu.Unlock()
	switch {
	case stopped && !forget:
		return nil, ErrStopped
	case !ok:
		return nil, fmt.Errorf("supervise: no child named %q", name)
	}
	p.cancel()
	<-p.done
	if forget {
		s.mu.Lock()
		if s.procs[name] == p {
			delete(s.procs, name)
		}
		s.mu.Unlock()
	}
	if p.killed {
		return p, s.killed(name)
	}
	return p, nil
}

// killed is the error of a child that had to be killed.
func (s *Supervisor) killed(name string) error {
	return fmt.Errorf("%s did not stop within %s after SIGTERM and was killed", name, s.cfg.GracePeriod)
}

// Stop stops every child, concurrently, and waits for them. It reports the
// children that had to be killed after the grace period. Start and Restart
// fail after Stop; calling Stop again is harmless.
func (s *Supervisor) Stop() error {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.closed)
	}
	procs := slices.Collect(maps.Values(s.procs))
	s.mu.Unlock()

	for _, p := range procs {
		p.cancel()
	}
	s.wg.Wait()

	slices.SortFunc(procs, func(a, b *process) int { return strings.Compare(a.spec.Name, b.spec.Name) })
	var errs []error
	for _, p := range procs {
		if p.killed {
			errs = append(errs, s.killed(p.spec.Name))
		}
	}
	return errors.Join(errs...)
}

// Remove stops one child as Stop stops them all — SIGTERM, then SIGKILL
// after the grace period — waits for it and forgets it, so its name can be
// started again with Start (a scale-down; StopChild keeps the child for a
// Restart). The exit is asked for, so it is not reported on Exits. It
// reports a child that had to be killed; a child that has already exited
// is just forgotten.
func (s *Supervisor) Remove(name string) error {
	_, err := s.halt(name, true)
	return err
}

// PID is the process id of the named child while it runs; false when no
// child of that name is running.
func (s *Supervisor) PID(name string) (int, bool) {
	s.mu.Lock()
	p, ok := s.procs[name]
	s.mu.Unlock()
	if !ok || p.exited() {
		return 0, false
	}
	return p.pid, true
}

func (s *Supervisor) startLocked(parent context.Context, spec Spec, extra []string) (int, error) {
	prefix := s.prefixLocked(spec.Name)
	stdout := newLineWriter(s.out, prefix)
	stderr := newLineWriter(s.out, prefix)

	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = spec.Env
	if len(extra) > 0 {
		if cmd.Env == nil {
			cmd.Env = os.Environ()
		}
		// os/exec keeps the last of duplicate names, so extra wins.
		cmd.Env = append(slices.Clip(cmd.Env), extra...)
	}
	cmd.Dir = spec.Dir
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.SysProcAttr = sysProcAttr()
	// Bounds how long Wait waits for the output pipes once the child has
	// gone, in case something it started escaped its process group.
	cmd.WaitDelay = s.cfg.GracePeriod
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("supervise: start %s: %w", spec.Name, err)
	}

	s.runs[spec.Name]++
	ctx, cancel := context.WithCancel(parent)
	p := &process{spec: spec, run: s.runs[spec.Name], pid: cmd.Process.Pid, parent: parent, cancel: cancel, done: make(chan struct{})}
	s.procs[spec.Name] = p
	s.wg.Go(func() { s.watch(ctx, p, cmd, stdout, stderr) })
	return p.run, nil
}

// watch waits for the child, stops it when ctx ends, and reports an exit
// nobody asked for.
func (s *Supervisor) watch(ctx context.Context, p *process, cmd *exec.Cmd, stdout, stderr *lineWriter) {
	defer p.cancel()

	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }() // ends when the child does; watch sees to that

	var err error
	select {
	case err = <-waited:
	case <-ctx.Done():
		p.killed, err = s.terminate(cmd, waited)
	}
	// Wait has returned, so the output copying has finished.
	stdout.flush()
	stderr.flush()
	close(p.done)

	if ctx.Err() != nil {
		return // asked to stop
	}
	select {
	case s.exits <- Exit{Name: p.spec.Name, Run: p.run, Err: err}:
	case <-s.closed:
	}
}

// terminate sends SIGTERM to the child's process group and SIGKILL when the
// grace period passes first. It reports whether it had to kill, and the
// child's exit as Wait reports it.
func (s *Supervisor) terminate(cmd *exec.Cmd, waited <-chan error) (killed bool, err error) {
	_ = signalGroup(cmd.Process, syscall.SIGTERM) // fails only when already gone
	timer := time.NewTimer(s.cfg.GracePeriod)
	defer timer.Stop()
	select {
	case err := <-waited:
		return false, err
	case <-timer.C:
		_ = signalGroup(cmd.Process, syscall.SIGKILL)
		return true, <-waited
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (s *Supervisor) prefixLocked(name string) string {
	label := fmt.Sprintf("%-*s |", s.cfg.PrefixWidth, name)
	if !s.cfg.Colour {
		return label + " "
	}
	colour, ok := s.colours[name]
	if !ok {
		colour = ansiColour(len(s.colours))
		s.colours[name] = colour
	}
	return "\x1b[" + colour + "m" + label + "\x1b[0m "
}

// ansiColour is the i-th of a few ANSI foreground colours, cycling.
func ansiColour(i int) string {
	codes := [...]string{"36", "32", "33", "35", "34", "96", "92", "93", "95", "94"}
	return codes[i%len(codes)]
}
