// Package servicetest runs one service in-process for its integration
// tests: its own database, topics and embedded broker, the environment every
// service reads, and helpers to publish events and call its HTTP API.
//
// Each service's run_test.go needed the same scaffolding (free port, broker,
// unique names, run in a goroutine, readiness, captured log); here it is
// written once. The package knows no domain: the tests add their own
// helpers on top of Do and GetJSON.
package servicetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// Timeout bounds every wait: readiness, WaitFor, a publish, the stop.
const Timeout = 30 * time.Second

// RunFunc is a service's run function, as main calls it.
type RunFunc func(ctx context.Context, getenv func(string) string, stdout io.Writer) error

// Service is one service running in-process for a test.
type Service struct {
	// URL is the base URL of the service's HTTP API.
	URL string
	// Topic is the order-events topic (ORDER_EVENTS_TOPIC), unique to the
	// test; DLQTopic is its DLQ_TOPIC.
	Topic    string
	DLQTopic string

	root       testing.TB // owns the service: cleanup, log
	t          testing.TB // reports the helpers' failures (Bind)
	logs       *LogBuffer
	client     *http.Client
	producer   *kgo.Client
	seeds      []string // KAFKA_BROKERS
	brokerAddr string
	cancel     context.CancelFunc
	done       chan error // run's result; nil until run started

	stopOnce sync.Once
	mu       sync.Mutex
	brokers  []*broker.Broker
}

// Start starts an embedded broker with fresh topics and runs the service on
// it with the standard environment (see StartWithoutBroker) overlaid by
// env. It returns once /readyz answers 200.
func Start(t testing.TB, run RunFunc, env map[string]string) *Service {
	t.Helper()
	return start(t, run, env, true)
}

// StartWithoutBroker runs the service while no broker listens at its
// KAFKA_BROKERS address yet; StartBroker brings one up there. The
// environment is DATABASE_URL, a fresh DB_NAME (dropped when the test ends),
// HTTP_ADDR and KAFKA_BROKERS on free ports, unique ORDER_EVENTS_TOPIC and
// DLQ_TOPIC, RETRY_* intervals of milliseconds, LOG_LEVEL=debug,
// SUITE_MODE=development, FAILPOINTS_ENABLED and PPROF_ENABLED, overlaid by
// env. The service runs until the test ends; its log is printed if the
// test failed.
func StartWithoutBroker(t testing.TB, run RunFunc, env map[string]string) *Service {
	t.Helper()
	return start(t, run, env, false)
}

func start(t testing.TB, run RunFunc, env map[string]string, withBroker bool) *Service {
	t.Helper()
	server := postgrestest.ServerURL(t)
	dbName := postgrestest.UniqueName("service")
	topic := postgrestest.UniqueName("order_events")
	httpAddr, brokerAddr := FreeAddr(t), FreeAddr(t)
	vars := map[string]string{
		"DATABASE_URL":           server,
		"DB_NAME":                dbName,
		"HTTP_ADDR":              httpAddr,
		"KAFKA_BROKERS":          brokerAddr,
		"ORDER_EVENTS_TOPIC":     topic,
		"DLQ_TOPIC":              topic + ".dlq",
		"RETRY_INITIAL_INTERVAL": "10ms",
		"RETRY_MAX_INTERVAL":     "50ms",
		"LOG_LEVEL":              "debug",
		// Nothing answers there: a service's callbacks to the order
		// service (inventory's shortages) wait in its outbox instead of
		// reaching a suite running on this machine.
		"ORDER_URL": "http://" + FreeAddr(t),
		// Development mode on loopback: no secrets to set up; tests arm
		// fail points and may profile.
		"SUITE_MODE":         "development",
		"FAILPOINTS_ENABLED": "true",
		"PPROF_ENABLED":      "true",
	}
	for k, v := range env {
		vars[k] = v
	}
	brokers := strings.Split(vars["KAFKA_BROKERS"], ",")
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		URL:        "http://" + httpAddr,
		Topic:      vars["ORDER_EVENTS_TOPIC"],
		DLQTopic:   vars["DLQ_TOPIC"],
		root:       t,
		t:          t,
		logs:       &LogBuffer{},
		client:     &http.Client{Timeout: Timeout},
		producer:   producer,
		seeds:      brokers,
		brokerAddr: brokerAddr,
		cancel:     cancel,
	}
	t.Cleanup(func() {
		s.Stop()
		producer.Close()
		s.mu.Lock()
		for _, b := range s.brokers {
			b.Close()
		}
		s.mu.Unlock()
		dropCtx, dropCancel := context.WithTimeout(context.Background(), Timeout)
		defer dropCancel()
		if err := postgres.DropDatabase(dropCtx, server, dbName); err != nil {
			t.Errorf("drop database: %v", err)
		}
		if t.Failed() {
			t.Logf("service log:\n%s", s.Logs())
		}
	})
	if withBroker {
		s.StartBroker()
	}
	s.done = make(chan error, 1)
	go func() { s.done <- run(ctx, func(k string) string { return vars[k] }, s.logs) }()
	poll.Until(t, Timeout, "the service to be ready", func() bool {
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("run ended early: %v\n%s", err, s.Logs())
		default:
		}
		resp, err := s.client.Get(s.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// StartBroker starts the embedded broker at the service's KAFKA_BROKERS
// address with its two topics. It is closed after the service stopped.
func (s *Service) StartBroker() {
	s.t.Helper()
	b, err := broker.Start(broker.Config{Addr: s.brokerAddr, Partitions: 4, Topics: []string{s.Topic, s.DLQTopic}})
	if err != nil {
		s.t.Fatalf("start broker: %v", err)
	}
	s.mu.Lock()
	s.brokers = append(s.brokers, b)
	s.mu.Unlock()
}

// Stop cancels run's context, as SIGTERM does, and fails the test unless
// run returns nil in time. The test's cleanup calls it; calling it before
// is harmless.
func (s *Service) Stop() {
	s.stopOnce.Do(func() {
		s.cancel()
		if s.done == nil { // run never started
			return
		}
		select {
		case err := <-s.done:
			if err != nil {
				s.root.Errorf("run = %v, want a clean stop", err)
			}
		case <-time.After(Timeout):
			s.root.Errorf("run did not stop within %s of its context ending", Timeout)
		}
	})
}

// Bind makes the helpers report failures to t from now on; a subtest
// binds its own t before using the service.
func (s *Service) Bind(t testing.TB) { s.t = t }

// T is the test the helpers report to.
func (s *Service) T() testing.TB { return s.t }

// Logs returns what the service has logged so far.
func (s *Service) Logs() string { return s.logs.String() }

// WaitFor polls cond until it holds, failing the test after Timeout.
func (s *Service) WaitFor(what string, cond func() bool) {
	s.t.Helper()
	poll.Until(s.t, Timeout, what, cond)
}

// Publish sends each envelope to Topic (at KAFKA_BROKERS) keyed by its
// aggregate, with the headers the outbox relay adds: as the order service
// publishes it.
func (s *Service) Publish(envs ...event.Envelope) {
	s.t.Helper()
	for _, env := range envs {
		s.PublishKeyed(env.AggregateID, env)
	}
}

// PublishKeyed sends env like Publish, under another key.
func (s *Service) PublishKeyed(key string, env event.Envelope) {
	s.t.Helper()
	msg, err := outbox.FromEnvelope(s.Topic, env)
	if err != nil {
		s.t.Fatal(err)
	}
	s.produce(key, msg.Payload, msg.Headers)
}

// PublishRaw sends value as it is, without headers: a message another
// client (or a bug) published.
func (s *Service) PublishRaw(key string, value []byte) {
	s.t.Helper()
	s.produce(key, value, nil)
}

func (s *Service) produce(key string, value []byte, headers map[string]string) {
	s.t.Helper()
	rec := &kgo.Record{Topic: s.Topic, Key: []byte(key), Value: value}
	for k, v := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := s.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		s.t.Fatalf("produce to %s: %v", s.Topic, err)
	}
}

// Drained returns once consumer group group has committed every message
// on Topic, asked of the broker (the lag of GET /admin/lag is a sample up
// to a second old): every message published before was read and
// acknowledged, and a service built on pkg/consumer acknowledges a message
// only after its effect committed, whatever became of it (applied, a
// duplicate, parked, dead-lettered). It fails the test after Timeout.
func (s *Service) Drained(group string) {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds...))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	poll.Until(s.t, Timeout, "group "+group+" to commit every message of "+s.Topic, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, s.Topic)
		if err != nil || ends.Error() != nil {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil || committed.Error() != nil { // a group that has not joined yet, too
			return false
		}
		behind := false
		ends.Each(func(end kadm.ListedOffset) {
			c, ok := committed.Lookup(s.Topic, end.Partition)
			behind = behind || end.Offset > 0 && (!ok || c.At < end.Offset)
		})
		return !behind
	})
}

// Do sends a request with a JSON body (none for a GET with an empty body)
// and returns the status code and the response body. An admin request
// names its operator (X-Operator: servicetest), as every operator action
// must.
func (s *Service) Do(method, path, body string) (int, []byte) {
	s.t.Helper()
	header := http.Header{}
	if method != http.MethodGet || body != "" {
		header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/admin/") {
		header.Set(admin.OperatorHeader, "servicetest")
	}
	return s.DoRaw(method, path, body, header)
}

// DoRaw sends a request with exactly header (no Content-Type unless it
// has one; a "Host" entry sets the Host), and body unless it is empty:
// what a browser or a careless client could send, for the tests of what
// a service refuses.
func (s *Service) DoRaw(method, path, body string, header http.Header) (int, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != "" || header.Get("Content-Type") != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	for k, vs := range header {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = header.Get(k)
			continue
		}
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

// GetJSON gets path, which must answer 200, and decodes the answer into v.
func (s *Service) GetJSON(path string, v any) {
	s.t.Helper()
	code, raw := s.Do(http.MethodGet, path, "")
	if code != http.StatusOK {
		s.t.Fatalf("GET %s: %d %s", path, code, raw)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		s.t.Fatalf("GET %s: decode: %v", path, err)
	}
}

// Counter sums the samples of counter name on /metrics whose labels
// contain label (0 when there are none).
func (s *Service) Counter(name, label string) float64 {
	s.t.Helper()
	code, raw := s.Do(http.MethodGet, "/metrics", "")
	if code != http.StatusOK {
		s.t.Fatalf("GET /metrics: %d", code)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			s.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// ProcessedCount is how often the consumer recorded eventID as processed
// (GET /admin/processed-events/{eventId}).
func (s *Service) ProcessedCount(eventID string) int {
	s.t.Helper()
	var out admin.ProcessedEvent
	s.GetJSON("/admin/processed-events/"+eventID, &out)
	return out.Count
}

// DeadLetters lists the consumer's dead letters of one aggregate.
func (s *Service) DeadLetters(aggregateID string) admin.DeadLetters {
	s.t.Helper()
	var out admin.DeadLetters
	s.GetJSON("/admin/dlq?aggregateId="+aggregateID, &out)
	return out
}

// SetFailPoint arms fail point name with action for times hits (0: every
// hit); action "off" disarms it.
func (s *Service) SetFailPoint(name, action string, times int) {
	s.t.Helper()
	body, err := json.Marshal(admin.FailPointRequest{Action: action, Times: times})
	if err != nil {
		s.t.Fatal(err)
	}
	if code, raw := s.Do(http.MethodPut, "/admin/failpoints/"+name, string(body)); code != http.StatusOK {
		s.t.Fatalf("fail point %s %s: %d %s", name, action, code, raw)
	}
}

// FailPoint reads fail point name as GET /admin/failpoints shows it,
// failing the test if the service does not declare it.
func (s *Service) FailPoint(name string) failpoint.Point {
	s.t.Helper()
	var out admin.FailPoints
	s.GetJSON("/admin/failpoints", &out)
	for _, p := range out.Points {
		if p.Name == name {
			return p
		}
	}
	s.t.Fatalf("fail point %s is not declared: %+v", name, out.Points)
	return failpoint.Point{}
}

// FailPointFired fails the test unless fail point name fired at least
// atLeast times since it was last armed: a test that arms a fault proves
// it happened.
func (s *Service) FailPointFired(name string, atLeast int) {
	s.t.Helper()
	if p := s.FailPoint(name); p.Hits < atLeast {
		s.t.Fatalf("fail point %s fired %d times, want at least %d: the fault never happened", name, p.Hits, atLeast)
	}
}

// Replay replays dead letter id (POST /admin/dlq/{id}/replay).
func (s *Service) Replay(id int64) dlq.ReplayResult {
	s.t.Helper()
	code, raw := s.Do(http.MethodPost, fmt.Sprintf("/admin/dlq/%d/replay", id), "")
	if code != http.StatusOK {
		s.t.Fatalf("replay dead letter %d: %d %s", id, code, raw)
	}
	var out dlq.ReplayResult
	if err := json.Unmarshal(raw, &out); err != nil {
		s.t.Fatalf("replay dead letter %d: decode: %v", id, err)
	}
	return out
}

// FreeAddr returns a local address nothing listens on at the moment.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Consume reads the first n records of topic, failing the test unless they
// arrive within Timeout.
func Consume(t testing.TB, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	if len(out) < n {
		t.Fatalf("consumed %d records of %s within %s, want %d", len(out), topic, Timeout, n)
	}
	return out[:n]
}

// LogBuffer collects a log written from several goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
