package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
)

func TestParse(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, cfg backlog.Config, target backlog.Target)
		wantErr string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, cfg backlog.Config, target backlog.Target) {
				if cfg.Count != 100_000 || cfg.Mix || cfg.Instances != 6 || cfg.ScaleAfter != 5*time.Second || cfg.Interval != time.Second ||
					strings.Join(cfg.Services, ",") != "inventory,points,notification" || !strings.HasPrefix(cfg.RunID, "backlog-") ||
					cfg.Out != filepath.Join(".data", "backlog", cfg.RunID) {
					t.Errorf("config %+v", cfg)
				}
				if strings.Join(target.Brokers, ",") != "127.0.0.1:9092" || target.Topic != "order-events" {
					t.Errorf("target %+v", target)
				}
			},
		},
		{
			name: "flags and environment",
			args: []string{"--count", "20000", "--run-id", "b1", "--instances", "3", "--scale-after", "2s", "--out", "none", "--services", "inventory, points", "--mix"},
			env:  map[string]string{"KAFKA_BROKERS": "10.0.0.1:9092,10.0.0.2:9092", "ADMIN_TOKEN": "t", "DATABASE_URL": "postgres://u@db:5432/postgres"},
			check: func(t *testing.T, cfg backlog.Config, target backlog.Target) {
				if cfg.Count != 20000 || cfg.RunID != "b1" || cfg.Instances != 3 || cfg.ScaleAfter != 2*time.Second || cfg.Out != "" ||
					len(cfg.Services) != 2 || !cfg.Mix {
					t.Errorf("config %+v", cfg)
				}
				if len(target.Brokers) != 2 || target.AdminToken != "t" || target.DatabaseURL != "postgres://u@db:5432/postgres" {
					t.Errorf("target %+v", target)
				}
			},
		},
		{name: "bad count", args: []string{"--count", "0"}, wantErr: "--count 0"},
		{name: "too many instances", args: []string{"--instances", "20"}, wantErr: "--instances 20"},
		{name: "an argument", args: []string{"now"}, wantErr: `unexpected argument "now"`},
		{name: "unknown flag", args: []string{"--replicas", "3"}, wantErr: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, target, err := parse(tt.args, env(tt.env), io.Discard)
			if tt.wantErr != "" {
				if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parse = %v, want a usage error with %q", err, tt.wantErr)
				}
				if cli.Exit("drill-backlog", usage, err, io.Discard) != cli.ExitUsage {
					t.Errorf("exit code of a usage error is not %d", cli.ExitUsage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg, target)
		})
	}
}

// Without a suite the drill fails with a clear error, not a usage error.
func TestRunWithoutSuite(t *testing.T) {
	env := map[string]string{"CONTROL_ADDR": "127.0.0.1:1", "DATABASE_URL": "postgres://nobody@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr strings.Builder
	err := run(ctx, []string{"--run-id", "x1", "--out", "none"}, func(k string) string { return env[k] }, io.Discard, &stderr)
	if err == nil || errors.Is(err, cli.ErrUsage) {
		t.Fatalf("run = %v, want a failure", err)
	}
	if code := cli.Exit("drill-backlog", usage, err, io.Discard); code != cli.ExitFailed {
		t.Errorf("exit code %d, want %d", code, cli.ExitFailed)
	}
}
