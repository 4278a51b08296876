package bench_test

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
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
	// APIRates, when set, are the rates it sweeps in one run against one
	// suite instead of APIRate (BENCH_API_RATES, e.g. "25,50,100,200"),
	// APIOrders orders at each.
	APIRates []int
	// ConsumerEvents is the backlog each consumer mode drains
	// (BENCH_CONSUMER_EVENTS).
	ConsumerEvents int
	// BacklogEvents is the backlog drill's size (BENCH_BACKLOG_EVENTS).
	BacklogEvents int
	// ReconcileOrders is how many orders a reconciliation run checks
	// (BENCH_RECONCILE_ORDERS), created at ReconcileRate a second
	// (BENCH_RECONCILE_RATE).
	ReconcileOrders int
	ReconcileRate   int
	// ConvergenceOrders is how many orders the convergence benchmark pays
	// at ConvergenceRate a second, then again while inventory is away
	// (BENCH_CONVERGENCE_ORDERS, BENCH_CONVERGENCE_RATE).
	ConvergenceOrders int
	ConvergenceRate   int
	// LimitEvents is how many records BenchmarkLimits pushes through each
	// stage (BENCH_LIMIT_EVENTS).
	LimitEvents int
	// PartitionEvents is the backlog BenchmarkPartitions drains at each
	// partition count (BENCH_PARTITION_EVENTS).
	PartitionEvents int
	// ServiceEnv is added to every service's environment
	// (BENCH_SERVICE_ENV, "NAME=value,NAME=value"), to measure a setting
	// other than the default: CONSUMER_BATCH_WORKERS=1, say.
	ServiceEnv map[string]string
	// ProfileDir, when set, keeps a CPU profile of each consumer's drain
	// in BenchmarkLimits there, <service>.pprof, and one of every service
	// in each step of BenchmarkAPIPayToConverged, api-<rate>-<service>.pprof
	// (BENCH_PROFILE_DIR): the profile that shows what limits a service,
	// taken where it is measured.
	ProfileDir string
}

func defaultSettings() settings {
	return settings{RelayRows: 20_000, APIOrders: 2_000, APIRate: 200, ConsumerEvents: 10_000, BacklogEvents: 100_000,
		ReconcileOrders: 10_000, ReconcileRate: 50, ConvergenceOrders: 1_000, ConvergenceRate: 50,
		LimitEvents: 100_000, PartitionEvents: 30_000}
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
	for _, rate := range s.APIRates {
		if rate < 1 {
			errs = append(errs, fmt.Errorf("BENCH_API_RATES: %d: want rates of at least 1", rate))
		}
	}
	for name, v := range map[string]int{"BENCH_RECONCILE_ORDERS": s.ReconcileOrders, "BENCH_RECONCILE_RATE": s.ReconcileRate,
		"BENCH_CONVERGENCE_ORDERS": s.ConvergenceOrders, "BENCH_CONVERGENCE_RATE": s.ConvergenceRate,
		"BENCH_LIMIT_EVENTS": s.LimitEvents, "BENCH_PARTITION_EVENTS": s.PartitionEvents} {
		if v < 1 {
			errs = append(errs, fmt.Errorf("%s=%d: want at least 1", name, v))
		}
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
	var ratesErr error
	for _, v := range r.List("BENCH_API_RATES", nil) {
		rate, err := strconv.Atoi(v)
		if err != nil {
			ratesErr = errors.Join(ratesErr, fmt.Errorf("BENCH_API_RATES: %q: not an integer", v))
			continue
		}
		s.APIRates = append(s.APIRates, rate)
	}
	s.ConsumerEvents = r.Int("BENCH_CONSUMER_EVENTS", s.ConsumerEvents)
	s.BacklogEvents = r.Int("BENCH_BACKLOG_EVENTS", s.BacklogEvents)
	s.ReconcileOrders = r.Int("BENCH_RECONCILE_ORDERS", s.ReconcileOrders)
	s.ReconcileRate = r.Int("BENCH_RECONCILE_RATE", s.ReconcileRate)
	s.ConvergenceOrders = r.Int("BENCH_CONVERGENCE_ORDERS", s.ConvergenceOrders)
	s.ConvergenceRate = r.Int("BENCH_CONVERGENCE_RATE", s.ConvergenceRate)
	s.LimitEvents = r.Int("BENCH_LIMIT_EVENTS", s.LimitEvents)
	s.PartitionEvents = r.Int("BENCH_PARTITION_EVENTS", s.PartitionEvents)
	s.ProfileDir = r.String("BENCH_PROFILE_DIR", "")
	s.ServiceEnv = map[string]string{}
	var envErr error
	for _, kv := range envconfig.Split(r.String("BENCH_SERVICE_ENV", "")) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			envErr = errors.Join(envErr, fmt.Errorf("BENCH_SERVICE_ENV: %q is not NAME=value", kv))
			continue
		}
		s.ServiceEnv[k] = v
	}
	if err := errors.Join(r.Err(), ratesErr, envErr, s.Validate()); err != nil {
		b.Fatalf("benchmark settings: %v", err)
	}
	return s
}
