package monitoring_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/tests/harness"
)

// deployDir is the repository's deploy/, from this package's directory
// (where go test runs it).
const deployDir = "../../deploy"

// usedNames returns every metric name the rule files of prometheus.yml and
// the provisioned dashboards query, each with where it is used.
func usedNames(t *testing.T) map[string][]string {
	t.Helper()
	read := func(rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(deployDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var cfg struct {
		RuleFiles []string `yaml:"rule_files"`
	}
	if err := yaml.Unmarshal(read("prometheus/prometheus.yml"), &cfg); err != nil {
		t.Fatalf("deploy/prometheus/prometheus.yml: %v", err)
	}
	var queries []query
	for _, rf := range cfg.RuleFiles {
		qs, err := ruleQueries(rf, read(filepath.Join("prometheus", rf)))
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, qs...)
	}
	dashboards, err := filepath.Glob(filepath.Join(deployDir, "grafana", "dashboards", "*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboard under deploy/grafana/dashboards (%v)", err)
	}
	for _, d := range dashboards {
		qs, err := dashboardQueries(filepath.Base(d), read(filepath.Join("grafana", "dashboards", filepath.Base(d))))
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, qs...)
	}
	used := map[string][]string{}
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", q.where, err, q.expr)
		}
		for _, n := range names {
			used[n] = append(used[n], q.where)
		}
	}
	if len(cfg.RuleFiles) == 0 || len(used) == 0 {
		t.Fatalf("rule files %v and %d dashboards use no metric: nothing would be checked", cfg.RuleFiles, len(dashboards))
	}
	return used
}

// TestEveryUsedMetricIsExported starts the suite, drives the traffic that
// makes every labelled vector appear (a paid order whose inventory apply
// fails once, a poison message, a refund whose predecessor never comes),
// scrapes /metrics of every service of harness.Services and fails for each
// name the alerts or the dashboard use that none of them exports.
func TestEveryUsedMetricIsExported(t *testing.T) {
	used := usedNames(t)
	s := harness.Start(t, harness.Options{Env: map[string]string{
		// A parked event whose predecessor never comes is dead-lettered
		// within a second, and consumer_gap_timeouts_total counts it.
		"PARK_DEADLINE":       "1s",
		"PARK_SWEEP_INTERVAL": "50ms",
	}})

	s.SetStock("SKU-MON", 10)
	s.FailConsumer("inventory", 1)
	amount := s.CreateOrder(harness.Order{ID: "O-MON-PAID", Customer: "C-1", Currency: "CNY",
		Items: []harness.Item{{SKU: "SKU-MON", Quantity: 1, UnitPrice: "10.00"}}})
	if code, out := s.Pay("O-MON-PAID", amount, "CNY"); code != 200 || out["businessCode"] != "SUCCESS" {
		t.Fatalf("pay: %d %v", code, out)
	}
	s.WaitSnapshot("O-MON-PAID", harness.Snapshot{Order: "PAID", OrderVersion: 3, Payment: "SUCCEEDED", Inventory: "DEDUCTED",
		PointsLedger: 1, Notifications: 1, DLQ: 0}, 30*time.Second)
	s.FailPointFired("inventory", "inventory.apply", 1)

	publishPoison(t, s, "O-MON-POISON")
	s.Publish(s.Events("O-MON-GAP", "SKU-MON", 1, "10.00").Refunded())
	s.WaitUntil(30*time.Second, "the poison message dead-lettered", func() bool { return s.DLQCount("O-MON-POISON") > 0 })
	s.WaitUntil(30*time.Second, "the refund without its payment dead-lettered after PARK_DEADLINE", func() bool {
		return s.DLQCount("O-MON-GAP") > 0
	})

	// A dead letter is counted just after it is recorded, which is what
	// the waits above saw: scrape until every name is there, briefly.
	var absent []string
	exported := map[string]bool{}
	settled(5*time.Second, func() bool {
		clear(exported)
		for _, svc := range harness.Services {
			code, page := s.Call(svc, "GET", "/metrics", nil)
			if code != 200 {
				t.Fatalf("%s GET /metrics: %d", svc, code)
			}
			names, err := exportedNames(page)
			if err != nil {
				t.Fatalf("%s GET /metrics: %v", svc, err)
			}
			maps.Copy(exported, names)
		}
		absent = missing(used, exported)
		return len(absent) == 0
	})
	t.Logf("%d metric names used by deploy/, %d series names exported by %s", len(used), len(exported), strings.Join(harness.Services, ", "))
	for _, name := range absent {
		t.Errorf("%s is used by %s, but no service of harness.Services exports it", name, strings.Join(used[name], "; "))
	}
}

// publishPoison writes a record that is not JSON for orderID to the
// suite's topic, with the headers a real event has: every consumer
// dead-letters it at once (PERMANENT).
func publishPoison(t *testing.T, s *harness.Suite, orderID string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Broker.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	eventID := event.NewEventID()
	rec := &kgo.Record{Topic: s.Topic, Key: []byte(orderID),
		Value: []byte(`{"eventId":"` + eventID + `","eventType":"OrderPaid", this is not JSON`),
		Headers: []kgo.RecordHeader{
			{Key: event.HeaderEventID, Value: []byte(eventID)},
			{Key: event.HeaderEventType, Value: []byte(event.OrderPaid)},
			{Key: event.HeaderEventVersion, Value: []byte("1")},
			{Key: event.HeaderAggregateID, Value: []byte(orderID)},
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("publish the poison message: %v", err)
	}
}

// settled polls cond until it holds or timeout passes, and says which;
// unlike harness.WaitUntil it does not fail the test, so the caller can
// report what is still wrong.
func settled(timeout time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
