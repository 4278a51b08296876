package bench_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

// settings are the benchmarks' scale. They come from the environment so the
// same `make bench` can be re-run bigger or smaller without editing code;
// the defaults are the figures.
type settings struct {
	// RelayRows is how many rows each relay moves (BENCH_RELAY_ROWS).
	RelayRows int
	// APIOrders is how many orders the API benchmark pays (BENCH_API_ORDERS).
	APIOrders int
	// APIRate is the orders per second it starts (BENCH_API_RATE).
	APIRate int
	// ConsumerEvents is the backlog each consumer mode drains
	// (BENCH_CONSUMER_EVENTS).
	ConsumerEvents int
	// BacklogEvents is the backlog drill's size (BENCH_BACKLOG_EVENTS).
	BacklogEvents int
}

func defaultSettings() settings {
	return settings{RelayRows: 20_000, APIOrders: 2_000, APIRate: 200, ConsumerEvents: 10_000, BacklogEvents: 100_000}
}

// Validate reports unusable settings, naming their variables.
func (s settings) Validate() error {
	var errs []error
	if s.RelayRows < 1 {
		errs = append(errs, fmt.Errorf("BENCH_RELAY_ROWS=%d: want at least 1", s.RelayRows))
	}
	if s.APIOrders < 1 {
		errs = append(errs, fmt.Errorf("BENCH_API_ORDERS=%d: want at least 1", s.APIOrders))
	}
	if s.BacklogEvents < 1 {
		errs = append(errs, fmt.Errorf("BENCH_BACKLOG_EVENTS=%d: want at least 1", s.BacklogEvents))
	}
	if s.ConsumerEvents < 1 {
		errs = append(errs, fmt.Errorf("BENCH_CONSUMER_EVENTS=%d: want at least 1", s.ConsumerEvents))
	}
	if s.APIRate < 1 {
		errs = append(errs, fmt.Errorf("BENCH_API_RATE=%d: want at least 1", s.APIRate))
	}
	return errors.Join(errs...)
}

// loadSettings is the one place the benchmarks read the environment.
func loadSettings(b *testing.B) settings {
	b.Helper()
	r := envconfig.New(os.Getenv)
	s := defaultSettings()
	s.RelayRows = r.Int("BENCH_RELAY_ROWS", s.RelayRows)
	s.APIOrders = r.Int("BENCH_API_ORDERS", s.APIOrders)
	s.APIRate = r.Int("BENCH_API_RATE", s.APIRate)
	s.ConsumerEvents = r.Int("BENCH_CONSUMER_EVENTS", s.ConsumerEvents)
	s.BacklogEvents = r.Int("BENCH_BACKLOG_EVENTS", s.BacklogEvents)
	if err := errors.Join(r.Err(), s.Validate()); err != nil {
		b.Fatalf("benchmark settings: %v", err)
	}
	return s
}
