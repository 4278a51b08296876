package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func TestExitStatus(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		name   string
		args   []string
		want   int
		stderr string
	}{
		{"no arguments", nil, cli.ExitUsage, "--count 0"},
		{"bad via", []string{"--count", "1", "--run-id", "r", "--via", "mq"}, cli.ExitUsage, `--via "mq"`},
		{"help", []string{"-h"}, cli.ExitOK, "usage: go run ./scripts/publish_orders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if got := cli.Exit("publish_orders", usage, err, &stderr); got != tt.want || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got, stderr.String(), tt.want, tt.stderr)
			}
		})
	}
	var stderr strings.Builder
	if got := cli.Exit("publish_orders", usage, fmt.Errorf("3 of 10 events failed: %w", errors.New("broker said no")), &stderr); got != cli.ExitFailed {
		t.Errorf("a failed run exits %d, want %d", got, cli.ExitFailed)
	}
	if got := cli.Exit("publish_orders", usage, fmt.Errorf("%w: bad", cli.ErrUsage), &stderr); got != cli.ExitUsage {
		t.Errorf("a usage error exits %d, want %d", got, cli.ExitUsage)
	}
}
