// Package loadgen is the load generator of the backlog drill
// (docs/backlog.md): it publishes N OrderPaid events straight to the
// order-events topic, or drives N orders through the HTTP API, each event
// for its own order and with ids derived from the run id and the index, so
// a re-run of the same run id republishes the same events and the
// consumers must treat them as duplicates; or, mixed (MixedEvents),
// refunds and rejected refunds besides, some events twice and some out of
// order. scripts/publish_orders is its command line.
package loadgen

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"regexp"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

// Via says how the events reach the topic.
type Via string

// The two ways of publishing.
const (
	// ViaBroker produces the OrderPaid events to the topic directly: the
	// consumers see a backlog at once, the order service sees nothing.
	ViaBroker Via = "broker"
	// ViaAPI creates, checks out and pays each order through the services,
	// so the events leave through the order service's outbox: slower, and
	// it loads the whole chain.
	ViaAPI Via = "api"
)

// Config is one run of the generator.
type Config struct {
	Via   Via
	Count int
	RunID string
	// SKUs is how many SKUs the items are spread over: order i buys one of
	// SKU-<run>-1 … SKU-<run>-SKUs, round robin. Few SKUs make hot rows.
	SKUs        int
	Brokers     []string
	Topic       string
	Rate        float64 // events (or orders) per second; 0 is unlimited
	Concurrency int
	Batch       int
	// SeedStock, when positive, sets every SKU's available stock to it
	// before publishing, so the deductions succeed.
	SeedStock    int
	MaxErrors    int
	OrderURL     string
	PaymentURL   string
	InventoryURL string
	// Mix publishes, for every order, its OrderPaid and, for some, a
	// refund or a rejected refund, about one event in ten twice, some
	// orders' events newest first (MixedEvents); Count still counts
	// orders. Only with ViaBroker.
	Mix bool
	// Progress, when set, is told how many events (orders) a batch
	// settled, published or failed, as each batch ends: the backlog drill
	// counts them into its own progress line. It is called from several
	// goroutines at once.
	Progress func(settled int)
}

// Limits of the flags.
const (
	MaxCount       = 99_999_999
	MaxConcurrency = 1024
	MaxBatch       = 10_000
)

// runIDPattern keeps run ids short and safe in ids, URLs and SKUs.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$`)

// Parse reads the command line (flags only), with defaults from the
// environment through getenv as the services read it. -h prints the flags
// to stderr and returns flag.ErrHelp; any other problem wraps cli.ErrUsage.
func Parse(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	env := envconfig.New(getenv)
	fs := flag.NewFlagSet("publish_orders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: go run ./scripts/publish_orders --count N --run-id ID [flags]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Publishes N OrderPaid events (order O-ID-000001 … at aggregateVersion 3, eventId E-ID-000001 …)")
		fmt.Fprintln(stderr, "to the order-events topic, or drives N orders through the HTTP API with --via api.")
		fmt.Fprintln(stderr, "The same run id republishes the same events: the consumers must see duplicates.")
		fmt.Fprintln(stderr, "\nflags:")
		fs.PrintDefaults()
	}
	var cfg Config
	via := fs.String("via", string(ViaBroker), "broker: produce OrderPaid events to the topic; api: create, check out and pay orders over HTTP")
	fs.IntVar(&cfg.Count, "count", 0, "how many events (orders) to publish (required)")
	fs.StringVar(&cfg.RunID, "run-id", "", "names the run; order, event, payment, customer and SKU ids derive from it (required)")
	fs.IntVar(&cfg.SKUs, "skus", 100, "spread the items over this many SKUs, SKU-<run-id>-1 … (small = hot rows)")
	brokers := fs.String("brokers", env.String("KAFKA_BROKERS", "127.0.0.1:9092"), "Kafka bootstrap brokers, comma-separated (KAFKA_BROKERS)")
	fs.StringVar(&cfg.Topic, "topic", env.String("ORDER_EVENTS_TOPIC", "order-events"), "the order events topic (ORDER_EVENTS_TOPIC)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "at most this many events (orders with --via api) per second; 0 = unlimited")
	fs.IntVar(&cfg.Concurrency, "concurrency", 8, "produce batches (or orders) in flight at once")
	fs.IntVar(&cfg.Batch, "batch", 500, "orders per batch a worker produces and awaits (--via broker; with --rate at most one second's worth)")
	fs.IntVar(&cfg.SeedStock, "seed-stock", 0, "first PUT /inventory/{sku} {available: N} for every SKU of the run; 0 = leave stock alone")
	fs.BoolVar(&cfg.Mix, "mix", false, "--via broker: refunds and rejected refunds besides the payments, ~10% of events twice, some orders newest event first")
	fs.IntVar(&cfg.MaxErrors, "max-errors", 100, "stop after this many failed events (orders); 0 = never stop")
	fs.StringVar(&cfg.OrderURL, "order-url", env.String("ORDER_URL", "http://127.0.0.1:8081"), "order service (ORDER_URL), for --via api")
	fs.StringVar(&cfg.PaymentURL, "payment-url", env.String("PAYMENT_URL", "http://127.0.0.1:8082"), "payment service (PAYMENT_URL), for --via api")
	fs.StringVar(&cfg.InventoryURL, "inventory-url", env.String("INVENTORY_URL", "http://127.0.0.1:8083"), "inventory service (INVENTORY_URL), for --seed-stock")
	if err := cli.ParseFlags(fs, args); err != nil {
		return Config{}, err
	}
	cfg.Via = Via(*via)
	cfg.Brokers = envconfig.Split(*brokers)
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	return cfg, nil
}

// Validate reports every unusable setting, naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Via != ViaBroker && c.Via != ViaAPI {
		bad("--via %q: want broker or api", c.Via)
	}
	if c.Count < 1 || c.Count > MaxCount {
		bad("--count %d: want 1 to %d", c.Count, MaxCount)
	}
	if !runIDPattern.MatchString(c.RunID) {
		bad("--run-id %q: want 1 to 40 letters, digits, '.', '_' or '-', starting with a letter or digit", c.RunID)
	}
	if c.SKUs < 1 {
		bad("--skus %d: want at least 1", c.SKUs)
	}
	if c.Rate < 0 {
		bad("--rate %v: want 0 (unlimited) or more", c.Rate)
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		bad("--concurrency %d: want 1 to %d", c.Concurrency, MaxConcurrency)
	}
	if c.Batch < 1 || c.Batch > MaxBatch {
		bad("--batch %d: want 1 to %d", c.Batch, MaxBatch)
	}
	if c.SeedStock < 0 {
		bad("--seed-stock %d: want 0 (leave stock alone) or more", c.SeedStock)
	}
	if c.MaxErrors < 0 {
		bad("--max-errors %d: want 0 (never stop) or more", c.MaxErrors)
	}
	if c.Via == ViaBroker && (len(c.Brokers) == 0 || c.Topic == "") {
		bad("--brokers and --topic must not be empty")
	}
	if c.Mix && c.Via != ViaBroker {
		bad("--mix: only with --via broker")
	}
	if c.Via == ViaAPI {
		errs = append(errs, checkURL("--order-url", c.OrderURL), checkURL("--payment-url", c.PaymentURL))
	}
	if c.SeedStock > 0 {
		errs = append(errs, checkURL("--inventory-url", c.InventoryURL))
	}
	return errors.Join(errs...)
}

func checkURL(flagName, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s %q: want an http(s)://host:port URL", flagName, raw)
	}
	return nil
}

// batchSize is the orders per batch: with a rate limit, at most a
// second's worth, so the pacing stays smooth.
func (c Config) batchSize() int {
	if c.Rate > 0 {
		return max(1, min(c.Batch, int(c.Rate)))
	}
	return c.Batch
}
