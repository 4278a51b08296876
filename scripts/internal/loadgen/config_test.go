package loadgen_test

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

func TestParseDefaultsFromTheEnvironment(t *testing.T) {
	env := map[string]string{"KAFKA_BROKERS": "k1:9092, k2:9092", "ORDER_EVENTS_TOPIC": "events-x", "ORDER_URL": "http://o:1"}
	cfg, err := loadgen.Parse([]string{"--count", "10", "--run-id", "r-1"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Via != loadgen.ViaBroker || cfg.Count != 10 || cfg.RunID != "r-1" || cfg.SKUs != 100 ||
		strings.Join(cfg.Brokers, ",") != "k1:9092,k2:9092" || cfg.Topic != "events-x" || cfg.OrderURL != "http://o:1" ||
		cfg.PaymentURL != "http://127.0.0.1:8082" || cfg.Rate != 0 || cfg.Batch != 500 || cfg.Concurrency != 8 {
		t.Errorf("config = %+v", cfg)
	}
}

func TestParseRejectsBadArguments(t *testing.T) {
	valid := []string{"--count", "10", "--run-id", "r1"}
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no count", []string{"--run-id", "r1"}, "--count 0"},
		{"no run id", []string{"--count", "10"}, `--run-id ""`},
		{"run id with a space", append(valid, "--run-id", "a b"), `--run-id "a b"`},
		{"run id with a slash", append(valid, "--run-id", "a/b"), `--run-id "a/b"`},
		{"unknown via", append(valid, "--via", "carrier-pigeon"), `--via "carrier-pigeon"`},
		{"no skus", append(valid, "--skus", "0"), "--skus 0"},
		{"negative rate", append(valid, "--rate", "-1"), "--rate -1"},
		{"no concurrency", append(valid, "--concurrency", "0"), "--concurrency 0"},
		{"huge batch", append(valid, "--batch", "10001"), "--batch 10001"},
		{"negative stock", append(valid, "--seed-stock", "-5"), "--seed-stock -5"},
		{"negative max errors", append(valid, "--max-errors", "-1"), "--max-errors -1"},
		{"no brokers", append(valid, "--brokers", " , "), "--brokers"},
		{"api with a bad order url", append(valid, "--via", "api", "--order-url", "localhost:8081"), "--order-url"},
		{"stock with a bad inventory url", append(valid, "--seed-stock", "5", "--inventory-url", "ftp://x"), "--inventory-url"},
		{"not a number", append(valid, "--count", "many"), "invalid value"},
		{"unknown flag", append(valid, "--colour", "red"), "flag provided but not defined"},
		{"positional argument", append(valid, "100000"), `unexpected argument "100000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadgen.Parse(tt.args, func(string) string { return "" }, io.Discard)
			if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) = %v, want a usage error naming %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseHelpIsNotAnError(t *testing.T) {
	var out strings.Builder
	_, err := loadgen.Parse([]string{"-h"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "--run-id") {
		t.Errorf("Parse(-h) = %v, printed %q; want flag.ErrHelp and the usage", err, out.String())
	}
}
