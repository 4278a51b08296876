package devrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// runnerName prefixes the runner's own lines.
const runnerName = "run"

// Run builds, prepares and runs the services until ctx ends (then it stops
// them and returns nil) or one of them crashes (then it stops the others and
// returns an error naming it). An interrupt during the preparation also
// returns nil.
//
// A service that exits with status 137 — an armed fail point's exit, the
// crash a drill plans — is not a crash of the suite: it stays down and the
// control API (Config.ControlAddr) restarts it, with extra environment if
// asked.
func Run(ctx context.Context, cfg Config, stdout io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	width := len(runnerName)
	for _, s := range cfg.Services {
		width = max(width, len(s.Name))
	}
	width = max(width, len(cfg.Console.Name))
	out := supervise.NewSyncWriter(stdout)
	log := &prefixed{out: out, prefix: fmt.Sprintf("%-*s | ", width, runnerName)}

	err := run(ctx, cfg, out, log, width)
	if ctx.Err() == nil {
		return err
	}
	// Interrupted: whatever failed meanwhile failed because of it, except a
	// service that had to be killed, which is worth a line.
	if err != nil && !errors.Is(err, ctx.Err()) {
		log.Printf("while stopping: %v", err)
	}
	log.Printf("stopped")
	return nil
}

func run(ctx context.Context, cfg Config, out *supervise.SyncWriter, log *prefixed, width int) error {
	if _, err := os.Stat(filepath.Join(cfg.Dir, "go.work")); err != nil {
		abs, _ := filepath.Abs(cfg.Dir) // "" if the working directory is gone
		return fmt.Errorf("no go.work in %s: run from the repository root (make run): %w", cmp.Or(abs, cfg.Dir), err)
	}
	// Fail early, before anything is built, when a port is taken.
	if err := CheckPortsFree(cfg.Services); err != nil {
		return err
	}
	if cfg.Console.Port != 0 {
		if err := portFree(suite.LoopbackAddr(cfg.Console.Port), fmt.Sprintf("port %d of the console", cfg.Console.Port)); err != nil {
			return err
		}
	}
	if cfg.ControlAddr != "" {
		if err := portFree(cfg.ControlAddr, "control API address "+cfg.ControlAddr+" (CONTROL_ADDR=off runs without it)"); err != nil {
			return err
		}
	}

	log.Printf("building %d services into %s/", len(cfg.Services), cfg.BinDir)
	if err := Build(ctx, cfg.Dir, cfg.BinDir, cfg.Services, log); err != nil {
		return err
	}
	if cfg.Console.Port != 0 {
		if err := build(ctx, cfg.Dir, filepath.Join(cfg.BinDir, cfg.Console.Name), cfg.Console.Package, log); err != nil {
			return err
		}
	}

	names := make([]string, len(cfg.Services))
	for i, s := range cfg.Services {
		names[i] = s.DBName
	}
	created, err := EnsureDatabases(ctx, cfg.DatabaseURL, names)
	if err != nil {
		return err
	}
	log.Printf("databases on %s: %s (created: %s)", postgres.Redact(cfg.DatabaseURL), strings.Join(names, ", "), cmp.Or(strings.Join(created, ", "), "none"))

	brokers := cfg.KafkaBrokers
	var embedded *brokerControl // the control API stops and starts it
	if brokers == "" {
		embedded, err = startBrokerControl(cfg.BrokerAddr, cfg.DataDir, log)
		if err != nil {
			return err
		}
		defer func() {
			embedded.close()
			log.Printf("embedded broker closed")
		}()
		brokers = strings.Join(embedded.Addrs(), ",")
		log.Printf("embedded broker on %s (data in %s)", brokers, filepath.Join(cfg.DataDir, "broker"))
	} else {
		log.Printf("using the brokers at KAFKA_BROKERS=%s", brokers)
	}

	sup, err := supervise.New(supervise.Config{Output: out, GracePeriod: cfg.GracePeriod, PrefixWidth: width, Colour: cfg.Colour})
	if err != nil {
		return err
	}
	err = runServices(ctx, cfg, sup, brokers, embedded, log)
	log.Printf("stopping the services")
	return errors.Join(err, sup.Stop())
}

// runServices starts the services and waits until ctx ends or one exits.
func runServices(ctx context.Context, cfg Config, sup *supervise.Supervisor, brokers string, embedded *brokerControl, log *prefixed) error {
	binDir := cfg.BinDir
	if !filepath.IsAbs(binDir) {
		binDir = filepath.Join(cfg.Dir, binDir)
	}
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return fmt.Errorf("bin directory: %w", err)
	}
	environ := cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	specs := map[string]supervise.Spec{}
	for _, s := range cfg.Services {
		spec := supervise.Spec{
			Name: s.Name,
			Path: filepath.Join(binDir, s.FullName()),
			Env:  ServiceEnv(environ, cfg.Services, s, cfg.DatabaseURL, brokers),
			Dir:  cfg.Dir,
		}
		if err := sup.Start(ctx, spec); err != nil {
			return err
		}
		specs[s.Name] = spec
	}

	client := &http.Client{Timeout: 2 * time.Second}
	if err := WaitReady(ctx, client, ReadyEndpoints(cfg.Services), cfg.ReadyTimeout, sup.Exits(), log); err != nil {
		return err
	}
	consoleURL := ""
	if cfg.Console.Port != 0 {
		// Once the services answer, so its first page has something to show.
		spec := supervise.Spec{Name: cfg.Console.Name, Path: filepath.Join(binDir, cfg.Console.Name),
			Env: ConsoleEnv(environ, cfg.Services, cfg.Console, cfg.DatabaseURL, brokers, cfg.ControlAddr), Dir: cfg.Dir}
		if err := sup.Start(ctx, spec); err != nil {
			return err
		}
		consoleURL = cfg.Console.LocalURL()
		ready := []Endpoint{{Name: cfg.Console.Name, URL: consoleURL + "/readyz"}}
		if err := WaitReady(ctx, client, ready, cfg.ReadyTimeout, sup.Exits(), log); err != nil {
			return err
		}
	}
	Walkthrough(log.out, cfg.Services, brokers, consoleURL)

	ctl := newControl(ctx, sup, embedded, cfg, specs, log)
	if cfg.ControlAddr != "" {
		stop, err := serveControl(ctx, cfg.ControlAddr, ctl.handler())
		if err != nil {
			return err
		}
		defer stop()
		log.Printf("control API on http://%s (POST /services/{name}/restart|stop|scale, GET /services/{name}/exit, POST /broker/stop|start|faults; see README.md (Drills))", cfg.ControlAddr)
	}

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-sup.Exits():
			if ctl.expected(e) {
				continue
			}
			err := exitError(e, "unexpectedly")
			log.Printf("%v", err)
			return err
		}
	}
}

// serveControl serves the control API on addr until the returned stop is
// called (which also ends the requests in flight).
func serveControl(ctx context.Context, addr string, h http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("control API on %s (set CONTROL_ADDR, or CONTROL_ADDR=off): %w", addr, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	// No write timeout: a restart, a scale-out and an exit wait answer only
	// when the service is ready or gone, and the API listens on loopback
	// alone. Reads and idle connections are bounded like the services'.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second,
		IdleTimeout: 2 * time.Minute, BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns ErrServerClosed after Shutdown
	}()
	return func() {
		cancel()
		shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if srv.Shutdown(shutdownCtx) != nil {
			_ = srv.Close()
		}
		<-served
	}, nil
}

// DevelopmentEnv are the defaults `make run` gives every service, before
// the inherited environment, which may override them: development mode
// (no secrets to set up; docs/security.md), and the fail points and
// profiles the drills use.
func DevelopmentEnv() []string {
	return []string{"SUITE_MODE=development", "FAILPOINTS_ENABLED=true", "PPROF_ENABLED=true"}
}

// ServiceEnv is the environment of service s: DevelopmentEnv, environ,
// then the settings the runner decides, which win over inherited ones of
// the same name. Every service listens on loopback only.
func ServiceEnv(environ []string, all []suite.Service, s suite.Service, databaseURL, brokers string) []string {
	env := append(DevelopmentEnv(), environ...)
	env = append(env, "DATABASE_URL="+databaseURL, "KAFKA_BROKERS="+brokers, "HTTP_ADDR="+s.LocalAddr(), "DB_NAME="+s.DBName)
	if s.ConsumerGroup != "" {
		env = append(env, "CONSUMER_GROUP="+s.ConsumerGroup)
	}
	return append(env, serviceURLs(all)...)
}

// serviceURLs are the variables that tell a process where the services
// answer.
func serviceURLs(all []suite.Service) []string {
	var env []string
	for _, s := range all {
		if s.URLEnv != "" {
			env = append(env, s.URLEnv+"="+s.LocalURL())
		}
	}
	return env
}

// ConsoleEnv is the console's environment: DevelopmentEnv, environ, then
// what the runner decides: its loopback address, the services' URLs, the
// brokers and database the drills it runs use, and the control API's URL
// (none when controlAddr is empty).
func ConsoleEnv(environ []string, all []suite.Service, c Console, databaseURL, brokers, controlAddr string) []string {
	env := append(DevelopmentEnv(), environ...)
	env = append(env, "DATABASE_URL="+databaseURL, "KAFKA_BROKERS="+brokers, "HTTP_ADDR="+suite.LoopbackAddr(c.Port))
	env = append(env, serviceURLs(all)...)
	control := ""
	if controlAddr != "" {
		control = "http://" + controlAddr
	}
	return append(env, "CONTROL_URL="+control)
}

// CheckPortsFree fails, naming the port, when another process already
// listens on a service's port (a `make run` still running, say).
func CheckPortsFree(services []suite.Service) error {
	var errs []error
	for _, s := range services {
		errs = append(errs, portFree(s.LocalAddr(), fmt.Sprintf("port %d of %s", s.Port, s.FullName())))
	}
	return errors.Join(errs...)
}

// portFree fails, saying whose addr is, when another process listens on it.
func portFree(addr, whose string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (is another `make run` still running?): %w", whose, err)
	}
	return l.Close()
}

// prefixed writes the runner's own lines, prefixed like a service's.
type prefixed struct {
	out    io.Writer
	prefix string
}

// Printf writes one prefixed line.
func (p *prefixed) Printf(format string, args ...any) {
	_, _ = io.WriteString(p.out, p.prefix+fmt.Sprintf(format, args...)+"\n")
}

// Write prefixes each line of b (used for progress output).
func (p *prefixed) Write(b []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		p.Printf("%s", line)
	}
	return len(b), nil
}
