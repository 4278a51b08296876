// Package harness runs the whole suite as a black box — the five service
// binaries as subprocesses, an in-process kfake broker, fresh databases and
// topics — and speaks the tutorial's test vocabulary: Publish, WaitConsumed,
// Inventory, ProcessedEventCount, PointsLedgerCount, Snapshot, WaitUntil,
// DLQCount and FailConsumer.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/postgres/postgrestest"
)

// Services are the five binaries, in start order.
var Services = []string{"order", "payment", "inventory", "points", "notification"}

// Consumers are the services that consume order-events, by consumer group.
var Consumers = map[string]string{
	"inventory":    "inventory-service",
	"points":       "points-service",
	"notification": "notification-service",
	"payment":      "payment-service",
}

var dbNames = map[string]string{
	"order": "orders", "payment": "payments", "inventory": "inventory", "points": "points", "notification": "notifications",
}

// Options tunes a suite for a test.
type Options struct {
	// Env is added to every service's environment (e.g. short retries).
	Env map[string]string
	// ServiceEnv is added to one service's environment.
	ServiceEnv map[string]map[string]string
}

// Suite is a running suite.
type Suite struct {
	Broker   *broker.Broker
	Topic    string
	DLQTopic string
	// AdminToken is sent with every admin request.
	AdminToken string

	t       testing.TB
	urls    map[string]string
	env     map[string][]string
	binDir  string
	logDir  string
	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	exited  map[string]chan struct{}
	server  string
	dbs     []string
	started time.Time
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binaries builds the five services once per test binary.
func binaries() (string, error) {
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		buildDir, err = os.MkdirTemp("", "fulfillment-bin-")
		if err != nil {
			buildErr = err
			return
		}
		for _, s := range Services {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, s+"-service"), "./services/"+s)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", s, err, out)
				return
			}
		}
	})
	return buildDir, buildErr
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(out))
	if work == "" || work == "off" {
		return "", fmt.Errorf("not inside the go.work workspace")
	}
	return filepath.Dir(work), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start builds and starts the suite for one test and stops it when the
// test ends. It skips the test when DATABASE_URL is unset.
func Start(t testing.TB, opts Options) *Suite {
	t.Helper()
	server := postgrestest.ServerURL(t)
	bin, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	s := &Suite{
		Topic:      postgrestest.UniqueName("order-events"),
		DLQTopic:   postgrestest.UniqueName("order-events-dlq"),
		AdminToken: "test-admin-token",
		t:          t,
		urls:       map[string]string{},
		env:        map[string][]string{},
		binDir:     bin,
		logDir:     t.TempDir(),
		procs:      map[string]*exec.Cmd{},
		exited:     map[string]chan struct{}{},
		server:     server,
		started:    time.Now(),
	}
	s.Broker, err = broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{s.Topic, s.DLQTopic}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)

	suffix := strings.TrimPrefix(postgrestest.UniqueName(""), "_")
	ports := map[string]int{}
	for _, name := range Services {
		if ports[name], err = freePort(); err != nil {
			t.Fatal(err)
		}
		s.urls[name] = fmt.Sprintf("http://127.0.0.1:%d", ports[name])
	}
	for _, name := range Services {
		db := dbNames[name] + "_" + suffix
		s.dbs = append(s.dbs, db)
		env := map[string]string{
			"DATABASE_URL":           server,
			"DB_NAME":                db,
			"KAFKA_BROKERS":          strings.Join(s.Broker.Addrs(), ","),
			"HTTP_ADDR":              fmt.Sprintf("127.0.0.1:%d", ports[name]),
			"ORDER_EVENTS_TOPIC":     s.Topic,
			"DLQ_TOPIC":              s.DLQTopic,
			"ORDER_URL":              s.urls["order"],
			"PAYMENT_URL":            s.urls["payment"],
			"INVENTORY_URL":          s.urls["inventory"],
			"POINTS_URL":             s.urls["points"],
			"NOTIFICATION_URL":       s.urls["notification"],
			"CALLBACK_SECRET":        "test-callback-secret",
			"ADMIN_TOKEN":            s.AdminToken,
			"LOG_LEVEL":              "debug",
			"RETRY_INITIAL_INTERVAL": "50ms",
			"RETRY_MAX_INTERVAL":     "200ms",
			"OUTBOX_POLL_INTERVAL":   "20ms",
			"OUTBOX_BACKOFF_INITIAL": "100ms",
			"OUTBOX_BACKOFF_MAX":     "500ms",
		}
		for k, v := range opts.Env {
			env[k] = v
		}
		for k, v := range opts.ServiceEnv[name] {
			env[k] = v
		}
		vars := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
		for k, v := range env {
			vars = append(vars, k+"="+v)
		}
		s.env[name] = vars
		s.startProcess(name)
	}
	for _, name := range Services {
		s.waitReady(name)
	}
	return s
}

func (s *Suite) startProcess(name string) {
	s.t.Helper()
	logFile, err := os.OpenFile(filepath.Join(s.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(s.binDir, name+"-service"))
	cmd.Env = s.env[name]
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	s.mu.Lock()
	s.procs[name], s.exited[name] = cmd, done
	s.mu.Unlock()
}

func (s *Suite) waitReady(name string) {
	s.t.Helper()
	s.WaitUntil(60*time.Second, name+" ready", func() bool {
		select {
		case <-s.exited[name]:
			s.t.Fatalf("%s exited during start:\n%s", name, s.logTail(name))
		default:
		}
		code, _ := s.do("GET", s.urls[name]+"/readyz", nil)
		return code == 200
	})
}

// Restart stops a service with SIGTERM and starts it again with the same
// environment plus extra (e.g. a fail point).
func (s *Suite) Restart(name string, extra map[string]string) {
	s.t.Helper()
	s.Stop(name)
	for k, v := range extra {
		s.env[name] = append(s.env[name], k+"="+v)
	}
	s.startProcess(name)
	s.waitReady(name)
}

// Stop ends a service gracefully and waits for it.
func (s *Suite) Stop(name string) {
	s.t.Helper()
	s.mu.Lock()
	cmd, done := s.procs[name], s.exited[name]
	s.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// URL is the base URL of a service.
func (s *Suite) URL(name string) string { return s.urls[name] }

func (s *Suite) stop() {
	for _, name := range Services {
		if _, ok := s.procs[name]; ok {
			s.Stop(name)
		}
	}
	if s.t.Failed() {
		for _, name := range Services {
			s.t.Logf("---- %s log (tail) ----\n%s", name, s.logTail(name))
		}
	}
	s.Broker.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, db := range s.dbs {
		if err := postgres.DropDatabase(ctx, s.server, db); err != nil {
			s.t.Errorf("drop %s: %v", db, err)
		}
	}
}

func (s *Suite) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.logDir, name+".log"))
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// WaitUntil polls cond until it holds, failing the test after timeout. It
// returns how long convergence took.
func (s *Suite) WaitUntil(timeout time.Duration, what string, cond func() bool) time.Duration {
	s.t.Helper()
	took, ok := waitFor(timeout, cond)
	if !ok {
		s.t.Fatalf("%s: not reached within %v", what, timeout)
	}
	return took
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return time.Since(start), false
		case <-tick.C:
		}
	}
	return time.Since(start), true
}
