package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/loadgen"
)

func TestExitStatus(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		name   string
		args   []string
		want   int
		stderr string
	}{
		{"no arguments", nil, exitUsage, "--count 0"},
		{"bad via", []string{"--count", "1", "--run-id", "r", "--via", "mq"}, exitUsage, `--via "mq"`},
		{"help", []string{"-h"}, exitOK, "usage: go run ./scripts/publish_orders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if got := exitCode(err, &stderr); got != tt.want || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got, stderr.String(), tt.want, tt.stderr)
			}
		})
	}
	var stderr strings.Builder
	if got := exitCode(fmt.Errorf("3 of 10 events failed: %w", errors.New("broker said no")), &stderr); got != exitFailed {
		t.Errorf("a failed run exits %d, want %d", got, exitFailed)
	}
	if got := exitCode(fmt.Errorf("%w: bad", loadgen.ErrUsage), &stderr); got != exitUsage {
		t.Errorf("a usage error exits %d, want %d", got, exitUsage)
	}
}
