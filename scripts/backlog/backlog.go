// Package backlog is the tutorial's backlog drill (docs/backlog.md): it
// brings each consumer service down to one instance, publishes N OrderPaid
// events with a run id straight to the topic (with Mix, a mixed load of
// payments, refunds, rejected refunds, republished and reordered events),
// scales each consumer out to several instances in the same consumer group
// after a delay, samples lag,
// oldest message age, throughput, retries, dead letters, handler duration,
// memory, database connections and partition assignment every interval,
// and once the backlog has drained verifies, with read-only SQL against the
// consumers' databases, that every event of the run was applied exactly
// once by inventory, points and notification, in order, with nothing
// dead-lettered. It reports a table, a JSON file with every sample and a
// self-contained HTML page with charts.
//
// The drill drives the suite through two small interfaces declared here,
// Scaler and Lister: `make run`'s control API implements them
// (NewControlClient), and so does the black-box test harness, which runs
// the same drill at small scale in `make test` (tests/drills).
package backlog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// The services the drill knows by their short names.
const (
	Inventory    = "inventory"
	Points       = "points"
	Notification = "notification"
	Payment      = "payment"
)

// Scaler sets how many processes of a consumer service run in its group.
type Scaler interface {
	// Scale starts or stops instances of service until n run (its own
	// process included) and returns once the new ones are ready.
	Scale(ctx context.Context, service string, n int) error
}

// Lister lists the running processes of a service.
type Lister interface {
	// Instances returns the running processes of service, its own first.
	Instances(ctx context.Context, service string) ([]Instance, error)
}

// Instance is one running process of a service.
type Instance struct {
	// Name is "inventory" for the service's own process, "inventory#2" …
	// for the extra ones.
	Name string `json:"name"`
	// URL is its base URL.
	URL string `json:"url"`
	// PID is its process id, 0 when unknown; it attributes group members
	// to instances when the broker tells the members' client ports.
	PID int `json:"pid,omitempty"`
}

// Config is one run of the drill. Zero fields take the defaults below.
type Config struct {
	// RunID names the run: event, order and SKU ids derive from it
	// (loadgen). It must not have been used before.
	RunID string
	// Count is how many orders to publish: one OrderPaid each, and with
	// Mix some a refund or a rejected refund besides.
	Count int
	// Mix publishes the mixed load of loadgen.MixedEvents: refunds and
	// rejected refunds, about one event in ten twice, some orders' refund
	// before their payment; the checks then hold each service to the
	// model of that load.
	Mix bool
	// SKUs spreads the orders over this many SKUs of the run.
	SKUs int
	// Instances is how many processes each scaled service runs after the
	// scale-out.
	Instances int
	// ScaleAfter is the delay from the start of the publish to the
	// scale-out.
	ScaleAfter time.Duration
	// Interval is the sampling period.
	Interval time.Duration
	// Services are the services scaled 1 → Instances and verified.
	Services []string
	// Timeout bounds the drill from the start of the publish to the drain.
	Timeout time.Duration
	// Out is the directory the JSON and HTML files go to; empty writes none.
	Out string
	// KeepInstances leaves the services scaled out at the end instead of
	// scaling them back to one instance.
	KeepInstances bool
	// Rate, Concurrency and Batch pace the publish (loadgen); 0: unlimited,
	// 8 produce calls in flight, 500 records per call.
	Rate        float64
	Concurrency int
	Batch       int
}

// Defaults of a Config.
const (
	DefaultCount       = 100_000
	DefaultSKUs        = 100
	DefaultInstances   = 6
	DefaultScaleAfter  = 5 * time.Second
	DefaultInterval    = time.Second
	DefaultTimeout     = 10 * time.Minute
	DefaultConcurrency = 8
	DefaultBatch       = 500
)

// DefaultServices are the consumers of OrderPaid; payment consumes the
// topic too, but only acts on refunds, so it keeps one instance and is only
// watched.
func DefaultServices() []string { return []string{Inventory, Points, Notification} }

// DefaultOut is where a run's files go under `make run`: .data/backlog/<run-id>.
func DefaultOut(runID string) string { return filepath.Join(".data", "backlog", runID) }

// NewRunID returns a run id no earlier run has used: "backlog-" and the time.
func NewRunID() string { return "backlog-" + time.Now().UTC().Format("20060102-150405") }

func (c Config) withDefaults() Config {
	c.RunID = cmp.Or(c.RunID, NewRunID())
	c.Count = cmp.Or(c.Count, DefaultCount)
	c.SKUs = cmp.Or(c.SKUs, DefaultSKUs)
	c.Instances = cmp.Or(c.Instances, DefaultInstances)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	if len(c.Services) == 0 {
		c.Services = DefaultServices()
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	return c
}

// Validate reports every setting the drill cannot run with, naming the
// flag of scripts/backlog/run.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	lc := c.loadgen("http://127.0.0.1", nil)
	if err := lc.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Instances < 1 || c.Instances > suite.MaxInstances {
		bad("--instances %d: want 1 to %d (what make run scales a consumer to)", c.Instances, suite.MaxInstances)
	}
	if c.ScaleAfter < 0 {
		bad("--scale-after %s: want 0 or more", c.ScaleAfter)
	}
	if c.Interval < 100*time.Millisecond {
		bad("--interval %s: want at least 100ms", c.Interval)
	}
	if c.Timeout <= 0 {
		bad("--timeout %s: want a positive duration", c.Timeout)
	}
	for _, s := range c.Services {
		if !slices.Contains(DefaultServices(), s) {
			bad("--services: %q: want some of %s", s, strings.Join(DefaultServices(), ", "))
		}
	}
	return errors.Join(errs...)
}

// seedStock is each SKU's stock: enough for every order, so that every
// deduction succeeds and the stock check means something.
func (c Config) seedStock() int { return (c.Count + c.SKUs - 1) / c.SKUs }

// loadgen is the publish of the run: straight to the broker, stock seeded
// through inventoryURL first.
func (c Config) loadgen(inventoryURL string, t *Target) loadgen.Config {
	lc := loadgen.Config{
		Via: loadgen.ViaBroker, Count: c.Count, RunID: c.RunID, SKUs: c.SKUs,
		Rate: c.Rate, Concurrency: c.Concurrency, Batch: c.Batch, Mix: c.Mix,
		SeedStock: c.seedStock(), MaxErrors: 100, InventoryURL: inventoryURL,
		Brokers: []string{suite.DefaultKafkaBrokers}, Topic: suite.OrderEventsTopic,
	}
	if t != nil {
		lc.Brokers, lc.Topic = t.Brokers, t.Topic
	}
	return lc
}

// Target is the suite the drill runs against.
type Target struct {
	// Scaler and Lister drive and list the services' processes.
	Scaler Scaler
	Lister Lister
	// Brokers are the Kafka bootstrap brokers; Topic the order events.
	Brokers []string
	Topic   string
	// AdminToken is sent as a bearer token to /admin/lag (ADMIN_TOKEN).
	AdminToken string
	// DatabaseURL is the Postgres server the services use (DATABASE_URL);
	// the drill reads their databases, never writes.
	DatabaseURL string
	// Databases names each service's database; nil: the suite's
	// (scripts/suite).
	Databases map[string]string
	// Groups names each consumer service's group; nil: the suite's.
	Groups map[string]string
	// HTTPClient reads /admin/lag and /metrics; nil: a 5 s timeout client.
	HTTPClient *http.Client
}

func (t Target) withDefaults() Target {
	t.Topic = cmp.Or(t.Topic, suite.OrderEventsTopic)
	if t.Databases == nil || t.Groups == nil {
		dbs, groups := map[string]string{}, map[string]string{}
		for _, s := range suite.Services() {
			dbs[s.Name] = s.DBName
			if s.ConsumerGroup != "" {
				groups[s.Name] = s.ConsumerGroup
			}
		}
		if t.Databases == nil {
			t.Databases = dbs
		}
		if t.Groups == nil {
			t.Groups = groups
		}
	}
	t.HTTPClient = cmp.Or(t.HTTPClient, &http.Client{Timeout: 5 * time.Second})
	return t
}

// Validate reports every setting the drill cannot run with.
func (t Target) Validate() error {
	t = t.withDefaults()
	var errs []error
	if t.Scaler == nil || t.Lister == nil {
		errs = append(errs, errors.New("no scaler or lister: the drill needs make run's control API (or the test harness)"))
	}
	if len(t.Brokers) == 0 {
		errs = append(errs, errors.New("no Kafka brokers"))
	}
	if u, err := url.Parse(t.DatabaseURL); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		errs = append(errs, fmt.Errorf("DATABASE_URL: want a postgres:// URL of the services' server"))
	}
	for _, s := range []string{Inventory, Points, Notification, Payment} {
		if t.Databases[s] == "" || t.Groups[s] == "" {
			errs = append(errs, fmt.Errorf("no database or consumer group for %s", s))
		}
	}
	return errors.Join(errs...)
}

// watched are the consumer services whose groups the drill samples: the
// scaled ones and payment, which reads the same topic.
func (t Target) watched() []string { return []string{Inventory, Points, Notification, Payment} }
