// Package harness runs the whole suite as a black box — the six service
// binaries as subprocesses, an in-process kfake broker, fresh databases and
// topics — and speaks the tutorial's test vocabulary: Publish, WaitConsumed,
// Inventory, ProcessedEventCount, PointsLedgerCount, Snapshot, WaitUntil,
// DLQCount and FailConsumer. The vocabulary is scripts/suiteapi, the
// suite's one API client, wrapped so that an error fails the test.
package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"

	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Services are the six binaries, in start order.
var Services = []string{"order", "payment", "inventory", "points", "notification", "reconciliation"}

// Consumers are the services that consume order-events, by consumer group.
var Consumers = map[string]string{
	"inventory":    "inventory-service",
	"points":       "points-service",
	"notification": "notification-service",
	"payment":      "payment-service",
}

var dbNames = map[string]string{
	"order": "orders", "payment": "payments", "inventory": "inventory", "points": "points", "notification": "notifications",
	"reconciliation": "reconciliation",
}

// Options tunes a suite for a test.
type Options struct {
	// Env is added to every service's environment (e.g. short retries).
	Env map[string]string
	// ServiceEnv is added to one service's environment.
	ServiceEnv map[string]map[string]string
	// Partitions is the partition count of the suite's topics; 0 means 4,
	// enough for the tests. Benchmarks ask for make run's 12.
	Partitions int32
}

// Suite is a running suite.
type Suite struct {
	Broker   *broker.Broker
	Topic    string
	DLQTopic string
	// AdminToken is sent with every admin request.
	AdminToken string

	t    testing.TB
	urls map[string]string
	// contract checks every answer the suite's client gets against its
	// service's OpenAPI document.
	contract  *Contract
	env       map[string][]string
	binDir    string
	logDir    string
	mu        sync.Mutex
	procs     map[string]*exec.Cmd
	exited    map[string]chan struct{}
	server    string
	dbs       []string
	started   time.Time
	brokerCfg broker.Config
	// dbByService names each service's database; handles opens lazily.
	dbByService map[string]string
	handles     map[string]*sqlx.DB
	// extras are the extra instances of Scale, by service; guarded by mu.
	extras map[string][]*extra
	// scaling serialises the Scale calls of each consumer service.
	scaling map[string]*sync.Mutex
	// api is the suite's client the vocabulary wraps.
	api *suiteapi.Client
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// BuildFlagsEnv names the environment variable whose go build flags the
// harness adds when it builds the services: E2E_GOFLAGS=-tags=nodedup
// builds consumers without deduplication, to show which tests catch that
// (docs/drills.md, Tests that can fail).
const BuildFlagsEnv = "E2E_GOFLAGS"

// binaries builds the six services once per test binary.
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
		// One go build for all six: the workspace builds them in parallel
		// and names each binary after its directory.
		args := []string{"build", "-o", buildDir + string(filepath.Separator)}
		args = append(args, strings.Fields(os.Getenv(BuildFlagsEnv))...)
		for _, s := range Services {
			args = append(args, "./services/"+s)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build the services: %w\n%s", err, out)
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

// handedOut are the ports freePorts has returned in this process. The
// tests run side by side (t.Parallel), and between a port's listener
// closing and its service binding it, another suite's freePorts could be
// handed the same port by the kernel: two services on one port, one of
// them failing to start while the other answers the first suite's
// requests. A port is therefore handed out once per process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePorts returns n distinct ports nothing listens on at the moment and
// no suite of this process was given before. Their listeners stay open
// until all n are chosen, so the kernel does not hand one out twice in
// one call.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	ports := make([]int, 0, n)
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue
		}
		handedOut.ports[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Start builds and starts the suite for one test and stops it when the
// test ends. It fails the test when no Postgres answers at DATABASE_URL
// (or its default).
func Start(t testing.TB, opts Options) *Suite {
	t.Helper()
	server := postgrestest.ServerURL(t)
	bin, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	s := &Suite{
		Topic:       postgrestest.UniqueName("order-events"),
		DLQTopic:    postgrestest.UniqueName("order-events-dlq"),
		AdminToken:  "test-admin-token",
		t:           t,
		urls:        map[string]string{},
		env:         map[string][]string{},
		binDir:      bin,
		logDir:      t.TempDir(),
		procs:       map[string]*exec.Cmd{},
		exited:      map[string]chan struct{}{},
		server:      server,
		started:     time.Now(),
		dbByService: map[string]string{},
		handles:     map[string]*sqlx.DB{},
		extras:      map[string][]*extra{},
		scaling:     map[string]*sync.Mutex{},
	}
	for name := range Consumers {
		s.scaling[name] = &sync.Mutex{}
	}
	partitions := opts.Partitions
	if partitions == 0 {
		partitions = 4
	}
	s.brokerCfg = broker.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Partitions: partitions, Topics: []string{s.Topic, s.DLQTopic}}
	s.Broker, err = broker.Start(s.brokerCfg)
	if err != nil {
		t.Fatal(err)
	}
	// A restarted broker must come back on the same address, as a real one does.
	s.brokerCfg.Addr = s.Broker.Addrs()[0]
	t.Cleanup(s.stop)

	suffix := strings.TrimPrefix(postgrestest.UniqueName(""), "_")
	free, err := freePorts(len(Services))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	for i, name := range Services {
		ports[name] = free[i]
		s.urls[name] = fmt.Sprintf("http://127.0.0.1:%d", ports[name])
	}
	s.contract = NewContract(t, http.DefaultTransport)
	s.api = suiteapi.New(suiteapi.Config{URLs: s.urls, AdminToken: s.AdminToken, Brokers: s.Broker.Addrs(), Topic: s.Topic,
		PollInterval: 25 * time.Millisecond,
		HTTPClient:   &http.Client{Timeout: suiteapi.DefaultHTTPTimeout, Transport: s.contract}})
	for _, name := range Services {
		db := dbNames[name] + "_" + suffix
		s.dbs = append(s.dbs, db)
		env := map[string]string{
			"DATABASE_URL":       server,
			"DB_NAME":            db,
			"KAFKA_BROKERS":      strings.Join(s.Broker.Addrs(), ","),
			"HTTP_ADDR":          fmt.Sprintf("127.0.0.1:%d", ports[name]),
			"ORDER_EVENTS_TOPIC": s.Topic,
			"DLQ_TOPIC":          s.DLQTopic,
			"ORDER_URL":          s.urls["order"],
			"PAYMENT_URL":        s.urls["payment"],
			"INVENTORY_URL":      s.urls["inventory"],
			"POINTS_URL":         s.urls["points"],
			"NOTIFICATION_URL":   s.urls["notification"],
			"RECONCILIATION_URL": s.urls["reconciliation"],
			// Reconciliation at the tests' pace: a short deadline, a
			// convergence check several times a second, and runs only when
			// a test asks for one.
			"CONVERGENCE_DEADLINE":       "3s",
			"CONVERGENCE_CHECK_INTERVAL": "200ms",
			"RECONCILIATION_INTERVAL":    "0s",
			"CALLBACK_SECRET":            CallbackSecret,
			"ADMIN_TOKEN":                s.AdminToken,
			"LOG_LEVEL":                  "debug",
			"RETRY_INITIAL_INTERVAL":     "50ms",
			"RETRY_MAX_INTERVAL":         "200ms",
			"OUTBOX_POLL_INTERVAL":       "20ms",
			"OUTBOX_BACKOFF_INITIAL":     "100ms",
			"OUTBOX_BACKOFF_MAX":         "500ms",
			// Development mode accepts the tests' published secrets; the
			// tests arm fail points and may profile.
			"SUITE_MODE":         "development",
			"FAILPOINTS_ENABLED": "true",
			"PPROF_ENABLED":      "true",
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
		s.dbByService[name] = db
	}
	s.StartServices(Services...)
	return s
}

// startProcess starts a service with its environment plus extra.
func (s *Suite) startProcess(name string, extra map[string]string) {
	s.t.Helper()
	env := slices.Clone(s.env[name])
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	cmd, done, err := s.spawn(name, name, env)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.procs[name], s.exited[name] = cmd, done
	s.mu.Unlock()
}

// spawn starts binary bin as process name with env, its output appended
// to <name>.log; done is closed once it has exited. It touches none of the
// suite's maps, so extra instances can be started from any goroutine.
func (s *Suite) spawn(name, bin string, env []string) (*exec.Cmd, chan struct{}, error) {
	logFile, err := os.OpenFile(filepath.Join(s.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(filepath.Join(s.binDir, bin))
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	return cmd, done, nil
}

func (s *Suite) waitReady(name string) {
	s.t.Helper()
	s.WaitUntil(60*time.Second, name+" ready", func() bool {
		select {
		case <-s.exited[name]:
			s.t.Fatalf("%s exited during start:\n%s", name, s.logTail(name))
		default:
		}
		code, _, _ := s.api.Raw(ctx(), name, "GET", "/readyz", nil, nil)
		return code == 200
	})
}

// Restart stops a service with SIGTERM and starts it again with its
// environment plus extra (e.g. FAILPOINTS), waiting until it is ready.
func (s *Suite) Restart(name string, extra map[string]string) {
	s.t.Helper()
	s.Stop(name)
	s.StartService(name, extra)
}

// StartService starts a stopped (or crashed) service with its environment
// plus extra and waits until it is ready.
func (s *Suite) StartService(name string, extra map[string]string) {
	s.t.Helper()
	s.startProcess(name, extra)
	s.waitReady(name)
}

// StartServices starts stopped services all at once, as a deployment
// restarts them, and waits until every one is ready.
func (s *Suite) StartServices(names ...string) {
	s.t.Helper()
	for _, name := range names {
		s.startProcess(name, nil)
	}
	for _, name := range names {
		s.waitReady(name)
	}
}

// WaitExit waits until a service's process has ended, as a fail point with
// action "exit" ends it, and returns its exit code.
func (s *Suite) WaitExit(name string, timeout time.Duration) int {
	s.t.Helper()
	s.mu.Lock()
	cmd, done := s.procs[name], s.exited[name]
	s.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		s.t.Fatalf("%s still running after %v", name, timeout)
	}
	return cmd.ProcessState.ExitCode()
}

// DB is a handle on a service's own database, for checks no API offers
// (outbox rows before a restart, say).
func (s *Suite) DB(service string) *sqlx.DB {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.handles[service]; ok {
		return db
	}
	db, err := postgres.Open(context.Background(), s.databaseURL(service), postgres.PoolConfig{MaxOpen: 2})
	if err != nil {
		s.t.Fatal(err)
	}
	s.handles[service] = db
	return db
}

// DatabaseURL is the URL of a service's own database.
func (s *Suite) DatabaseURL(service string) string {
	s.t.Helper()
	return s.databaseURL(service)
}

func (s *Suite) databaseURL(service string) string {
	dsn, err := postgres.WithDatabase(s.server, s.dbByService[service])
	if err != nil {
		s.t.Fatal(err)
	}
	return dsn
}

// Stop ends a service gracefully and waits for it; a service that already
// exited is left as it is.
func (s *Suite) Stop(name string) {
	s.t.Helper()
	s.mu.Lock()
	cmd, done := s.procs[name], s.exited[name]
	s.mu.Unlock()
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// StopBroker takes the broker away, as an outage would; its log is kept.
func (s *Suite) StopBroker() {
	s.t.Helper()
	s.Broker.Close()
	s.Broker = nil
}

// StartBroker brings the broker back on the same address with its log.
func (s *Suite) StartBroker() {
	s.t.Helper()
	b, err := broker.Start(s.brokerCfg)
	if err != nil {
		s.t.Fatalf("restart broker: %v", err)
	}
	s.Broker = b
}

// URL is the base URL of a service.
func (s *Suite) URL(name string) string { return s.urls[name] }

func (s *Suite) stop() {
	s.stopExtras()
	for _, name := range Services {
		if _, ok := s.procs[name]; ok {
			s.Stop(name)
		}
	}
	if s.t.Failed() {
		for _, name := range Services {
			s.t.Logf("---- %s log (tail) ----\n%s", name, s.logTail(name))
		}
		s.logExtras()
	}
	for _, db := range s.handles {
		db.Close()
	}
	if s.api != nil {
		s.api.Close()
	}
	if s.Broker != nil {
		s.Broker.Close()
	}
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

// CallbackSecret is the HMAC key the suite's payment and order services share.
const CallbackSecret = "test-callback-secret"

// ContractChecked is how many of the services' answers the suite's client
// validated against their OpenAPI documents (Contract).
func (s *Suite) ContractChecked() int64 { return s.contract.Checked() }
