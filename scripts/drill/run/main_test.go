package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"no drill named", nil, nil, cli.ExitUsage, "name a drill"},
		{"unknown drill", []string{"backlog"}, nil, cli.ExitUsage, `unknown drill "backlog"`},
		{"bad target", []string{"--target", "order=ftp://x", "all"}, nil, cli.ExitUsage, "--target"},
		{"unknown service", []string{"--target", "shipping=http://x", "all"}, nil, cli.ExitUsage, "--target"},
		{"bad retry bound", []string{"all"}, map[string]string{"RETRY_MAX_ATTEMPTS": "many"}, cli.ExitUsage, "RETRY_MAX_ATTEMPTS"},
		{"bad retry interval", []string{"all"}, map[string]string{"RETRY_INITIAL_INTERVAL": "soon"}, cli.ExitUsage, "RETRY_INITIAL_INTERVAL"},
		{"bad park deadline", []string{"all"}, map[string]string{"PARK_DEADLINE": "never"}, cli.ExitUsage, "PARK_DEADLINE"},
		{"bad timeout", []string{"--timeout", "0s", "all"}, nil, cli.ExitUsage, "--timeout"},
		{"bad outage", []string{"--outage", "-1s", "all"}, nil, cli.ExitUsage, "--outage"},
		{"unknown flag", []string{"--nope", "all"}, nil, cli.ExitUsage, "flag provided but not defined"},
		{"help", []string{"-h"}, nil, cli.ExitOK, "usage: go run ./scripts/drill/run"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Exit("drill", usage, run(context.Background(), tt.args, env(tt.env), &stdout, &stderr), &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

// Against a suite that is not there, every case fails with the reason and
// the run exits 1; without a control API the crash drills are skipped.
func TestRunAgainstNothing(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"--control", "none", "--timeout", "1s", "--brokers", "127.0.0.1:1",
		"--target", "order=http://127.0.0.1:1,payment=http://127.0.0.1:1,inventory=http://127.0.0.1:1,points=http://127.0.0.1:1,notification=http://127.0.0.1:1",
		"loss"}
	code := cli.Exit("drill", usage, run(context.Background(), args, env(nil), &stdout, &stderr), &stderr)
	if code != cli.ExitFailed {
		t.Fatalf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, cli.ExitFailed, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"RESULT  CASE",
		"SKIP    loss/before-publish",
		"SKIP    loss/after-publish",
		"SKIP    loss/lost-ack",
		"SKIP    loss/consumer-crash",
		"FAIL    loss/consumer-failure",
		"FAIL    loss/rollback",
		"SKIP    loss/broker-outage",
		"SKIP    loss/callback-outage",
		"connection refused",
		"0 passed, 2 failed, 6 skipped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// The suite's databases are make run's unless --target names another
// suite; --database-url names them for one, --keep-planted keeps the
// planted orders' rows.
func TestDatabasesAndKeepPlanted(t *testing.T) {
	const remote = "order=http://10.0.0.5:8081"
	tests := []struct {
		name      string
		args      []string
		databases int
		keep      bool
	}{
		{"make run", []string{"all"}, 6, false},
		{"another suite", []string{"--target", remote, "all"}, 0, false},
		{"another suite with its server", []string{"--target", remote, "--database-url", "postgres://u@10.0.0.5:5432/postgres", "all"}, 6, false},
		{"keep planted", []string{"--keep-planted", "all"}, 6, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			opts, err := parse(tt.args, env(nil), &stderr)
			if err != nil {
				t.Fatal(err, stderr.String())
			}
			if len(opts.target.Databases) != tt.databases || opts.target.KeepPlanted != tt.keep {
				t.Errorf("databases %v, keep planted %v; want %d, %v", opts.target.Databases, opts.target.KeepPlanted, tt.databases, tt.keep)
			}
		})
	}
}
