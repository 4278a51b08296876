package postgres_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// A malformed URL's error says what is wrong without its password.
func TestURLErrorsHideThePassword(t *testing.T) {
	const password = "s3cr3t-pw"
	tests := []struct{ name, url string }{
		{"bad port", "postgres://app:" + password + "@db:54x2/app"},
		{"control character", "postgres://app:" + password + "@db/app\x7f"},
		{"space in host", "postgres://app:" + password + "@d b/app"},
		{"wrong scheme", "mysql://app:" + password + "@db/app"},
		{"percent in password", "postgres://app:" + password + "%zz@db/app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := postgres.WithDatabase(tt.url, "orders")
			if err == nil {
				t.Fatal("WithDatabase accepted a malformed URL")
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("error %q shows the password", err)
			}
			_, err = postgres.Open(context.Background(), tt.url, postgres.PoolConfig{})
			if err == nil {
				t.Fatal("Open accepted a malformed URL")
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("Open's error %q shows the password", err)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://app:pw@db:5432/app?sslmode=disable", "postgres://app:xxxxx@db:5432/app?sslmode=disable"},
		{`open "postgres://u:p@h/x": bad`, `open "postgres://u:xxxxx@h/x": bad`},
		{"postgres://app@db/app", "postgres://app@db/app"},
		{"no url here", "no url here"},
	}
	for _, tt := range tests {
		if got := postgres.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReadTimeouts(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    postgres.Timeouts
		wantErr []string
	}{
		{"defaults", nil, postgres.DefaultTimeouts(), nil},
		{"set", map[string]string{"DB_CONNECT_TIMEOUT": "2s", "DB_STATEMENT_TIMEOUT": "250ms", "DB_KEEPALIVE": "3s"},
			postgres.Timeouts{Connect: 2 * time.Second, Statement: 250 * time.Millisecond, KeepAlive: 3 * time.Second}, nil},
		{"too small", map[string]string{"DB_CONNECT_TIMEOUT": "10ms", "DB_STATEMENT_TIMEOUT": "0s", "DB_KEEPALIVE": "1ms"},
			postgres.Timeouts{}, []string{"DB_CONNECT_TIMEOUT", "DB_STATEMENT_TIMEOUT", "DB_KEEPALIVE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := postgres.ReadTimeouts(envconfig.New(func(k string) string { return tt.env[k] }))
			err := got.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil || got != tt.want {
					t.Fatalf("ReadTimeouts = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil", got)
			}
			for _, v := range tt.wantErr {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
		})
	}
}

// A statement running past the statement timeout is cancelled by the
// server.
func TestStatementTimeout(t *testing.T) {
	_, name := postgrestest.NewDatabase(t)
	dsn, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
	if err != nil {
		t.Fatal(err)
	}
	db, err := postgres.Open(context.Background(), dsn, postgres.PoolConfig{MaxOpen: 1,
		Timeouts: postgres.Timeouts{Statement: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	_, err = db.Exec(`SELECT pg_sleep(5)`)
	var pqErr *pq.Error
	if !errors.As(err, &pqErr) || pqErr.Code != "57014" {
		t.Fatalf("pg_sleep(5) = %v, want query_canceled (57014)", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("cancelled after %v, want about 200ms", took)
	}
}

// A server that accepts the connection and never answers fails the
// connection after the connect timeout instead of holding the caller.
func TestConnectTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = postgres.Open(ctx, "postgres://u:pw@"+ln.Addr().String()+"/x?sslmode=disable",
		postgres.PoolConfig{Timeouts: postgres.Timeouts{Connect: time.Second}})
	if err == nil {
		t.Fatal("Open succeeded against a silent server")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("gave up after %v, want about the 1s connect timeout", took)
	}
}
