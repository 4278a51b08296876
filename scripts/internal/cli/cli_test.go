package cli_test

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func TestExit(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		want   int
		stderr string
	}{
		{"success", nil, cli.ExitOK, ""},
		{"help", flag.ErrHelp, cli.ExitOK, ""},
		{"usage", cli.Usagef("--count %d: want at least 1", 0), cli.ExitUsage, "tool: usage: --count 0: want at least 1\nrun tool -h\n"},
		{"wrapped usage", fmt.Errorf("parse: %w", cli.ErrUsage), cli.ExitUsage, "tool: parse: usage\nrun tool -h\n"},
		{"failed verdict", fmt.Errorf("2 cases: %w", cli.ErrFailed), cli.ExitFailed, ""},
		{"failure", errors.New("broker down"), cli.ExitFailed, "tool: broker down\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr strings.Builder
			if got := cli.Exit("tool", "run tool -h", tt.err, &stderr); got != tt.want || stderr.String() != tt.stderr {
				t.Errorf("Exit = %d, stderr %q; want %d, %q", got, stderr.String(), tt.want, tt.stderr)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want error
	}{
		{"flags", []string{"--n", "3"}, nil},
		{"help", []string{"-h"}, flag.ErrHelp},
		{"unknown flag", []string{"--m", "3"}, cli.ErrUsage},
		{"an argument", []string{"now"}, cli.ErrUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.SetOutput(&strings.Builder{})
			fs.Int("n", 0, "a number")
			if err := cli.ParseFlags(fs, tt.args); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("ParseFlags = %v, want %v", err, tt.want)
			}
		})
	}
}
