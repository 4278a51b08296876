package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/sync/errgroup"
	"golang.org/x/time/rate"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

// ErrTooManyErrors stops a run once MaxErrors events failed.
var ErrTooManyErrors = errors.New("too many failed events")

// Result is what a run did.
type Result struct {
	Via       Via
	RunID     string
	Requested int
	// Published counts the events the broker acknowledged (orders paid, via
	// the API); Failed the ones that were not.
	Published int
	Failed    int
	// SeededSKUs is how many SKUs got their stock set first.
	SeededSKUs int
	Duration   time.Duration
	// FirstError is the first failure, kept for the report.
	FirstError error
}

// Rate is the published events per second.
func (r Result) Rate() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Published) / r.Duration.Seconds()
}

// publisher publishes the items first … last (1-based, inclusive) and
// reports each failure through fail.
type publisher interface {
	publish(ctx context.Context, first, last int, fail func(i int, err error)) error
	close()
}

// Run seeds the stock if asked, publishes cfg.Count events with a progress
// bar on stderr, writes the summary table to stdout and returns the
// result. It returns an error when an event failed or ctx ended early.
func Run(ctx context.Context, cfg Config, stdout, stderr io.Writer) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %w", cli.ErrUsage, err)
	}
	res := Result{Via: cfg.Via, RunID: cfg.RunID, Requested: cfg.Count}
	if cfg.SeedStock > 0 {
		n, err := seedStock(ctx, cfg)
		if err != nil {
			return res, err
		}
		res.SeededSKUs = n
		fmt.Fprintf(stderr, "stock of %d SKUs (SKU-%s-1 … SKU-%s-%d) set to %d\n", n, cfg.RunID, cfg.RunID, cfg.SKUs, cfg.SeedStock)
	}
	var pub publisher
	var err error
	switch cfg.Via {
	case ViaAPI:
		pub = &apiPublisher{cfg: cfg, api: newClient(cfg)}
	default:
		pub, err = newBrokerPublisher(cfg)
	}
	if err != nil {
		return res, err
	}
	defer pub.close()

	bar := progressbar.NewOptions64(int64(cfg.Count),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("%s via %s", cfg.RunID, cfg.Via)),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(unit(cfg.Via)),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
	)
	start := time.Now()
	published, failed, firstErr, err := drive(ctx, cfg, pub, bar)
	res.Duration = time.Since(start)
	res.Published, res.Failed, res.FirstError = published, failed, firstErr
	if !bar.IsFinished() {
		_ = bar.Exit() // leave the bar where it stopped, on its own line
		fmt.Fprintln(stderr)
	}
	if werr := WriteSummary(stdout, cfg, res); werr != nil {
		return res, werr
	}
	switch {
	case err != nil:
		return res, err
	case ctx.Err() != nil:
		return res, fmt.Errorf("interrupted after %d of %d %s: %w", published, cfg.Count, unit(cfg.Via), ctx.Err())
	case failed > 0:
		return res, fmt.Errorf("%d of %d %s failed; the first: %w", failed, cfg.Count, unit(cfg.Via), firstErr)
	}
	return res, nil
}

// drive hands out batches of indexes to cfg.Concurrency workers, paced by
// the rate limit, until every index is published or the run stops.
func drive(ctx context.Context, cfg Config, pub publisher, bar *progressbar.ProgressBar) (published, failed int, firstErr error, err error) {
	var limiter *rate.Limiter
	batch := cfg.batchSize()
	if cfg.Via == ViaAPI {
		batch = 1
	}
	if cfg.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(cfg.Rate), batch)
	}
	var (
		next              atomic.Int64 // the last index handed out
		okCount, failures atomic.Int64
		mu                sync.Mutex // guards firstErr
	)
	fail := func(i int, e error) {
		failures.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = fmt.Errorf("%s %d: %w", unit(cfg.Via), i, e)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for range cfg.Concurrency {
		g.Go(func() error {
			for gctx.Err() == nil {
				last := int(next.Add(int64(batch)))
				first := last - batch + 1
				if first > cfg.Count {
					return nil
				}
				last = min(last, cfg.Count)
				n := last - first + 1
				if limiter != nil {
					if err := limiter.WaitN(gctx, n); err != nil {
						return nil // the run is stopping
					}
				}
				failedHere := 0
				countFail := func(i int, e error) {
					failedHere++
					fail(i, e)
				}
				if err := pub.publish(gctx, first, last, countFail); err != nil {
					return err
				}
				okCount.Add(int64(n - failedHere))
				_ = bar.Add(n)
				if cfg.Progress != nil {
					cfg.Progress(n)
				}
				if cfg.MaxErrors > 0 && failures.Load() >= int64(cfg.MaxErrors) {
					return ErrTooManyErrors
				}
			}
			return nil
		})
	}
	err = g.Wait()
	if errors.Is(err, ErrTooManyErrors) {
		err = fmt.Errorf("stopped after %d failed %s (--max-errors %d); the first: %w", failures.Load(),
			unit(cfg.Via), cfg.MaxErrors, firstErr)
	}
	return int(okCount.Load()), int(failures.Load()), firstErr, err
}

func unit(v Via) string {
	if v == ViaAPI {
		return "orders"
	}
	return "events"
}

// WriteSummary writes the run's figures as a two-column table.
func WriteSummary(w io.Writer, cfg Config, r Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	target := fmt.Sprintf("broker %s, topic %s", strings.Join(cfg.Brokers, ","), cfg.Topic)
	if cfg.Via == ViaAPI {
		target = fmt.Sprintf("api: order %s, payment %s", cfg.OrderURL, cfg.PaymentURL)
	}
	rows := [][2]string{
		{"run id", r.RunID},
		{"via", target},
		{"orders", fmt.Sprintf("%s … %s", OrderID(r.RunID, 1), OrderID(r.RunID, r.Requested))},
		{"skus", fmt.Sprintf("%d (%s …), stock %s", cfg.SKUs, SKU(r.RunID, 1), seeded(cfg, r))},
		{unit(cfg.Via) + " requested", fmt.Sprint(r.Requested)},
		{unit(cfg.Via) + " published", fmt.Sprint(r.Published)},
		{"errors", fmt.Sprint(r.Failed)},
		{"duration", r.Duration.Round(time.Millisecond).String()},
		{"rate", fmt.Sprintf("%.0f %s/s", r.Rate(), unit(cfg.Via))},
	}
	if r.FirstError != nil {
		rows = append(rows, [2]string{"first error", r.FirstError.Error()})
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

func seeded(cfg Config, r Result) string {
	if r.SeededSKUs == 0 {
		return "left alone"
	}
	return fmt.Sprintf("set to %d each", cfg.SeedStock)
}
