package service_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// audit is the identity of a service the tests declare.
func audit() service.Identity {
	return service.Identity{Name: "audit-service", Database: "audit", Port: 8099,
		FailPoints: append(outbox.FailPoints(), "audit.apply")}
}

// dev is the environment of development mode, overlaid by env.
func dev(env map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if k == "SUITE_MODE" {
			return service.ModeDevelopment
		}
		return ""
	}
}

// requireNamed requires err to name every variable in want, or, with want
// empty, no error at all.
func requireNamed(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("configuration refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("configuration accepted, want an error naming %v", want)
	}
	for _, v := range want {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}

func TestLoadConsumerConfigDefaults(t *testing.T) {
	c, err := service.LoadConsumerConfig(dev(nil), audit())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "audit-service" || c.DBName != "audit" || c.HTTPAddr != "127.0.0.1:8099" || c.LogLevel != "info" ||
		c.AdminToken != "" || c.FailPoints != "" || c.Consumer.ConsumerGroup != "audit-service" ||
		c.Admission.MaxInFlight != 0 || c.Admission.QueueWait != httpapi.DefaultQueueWait || c.Admission.QueueInterval != httpapi.DefaultQueueInterval ||
		c.MemoryLimitMiB != service.DefaultMemoryLimitMiB || c.Idempotency.TTL != idempotency.DefaultTTL {
		t.Fatalf("defaults = %+v", c)
	}
}

// TestMemoryLimit: MEMORY_LIMIT_MIB sets the soft limit, 0 leaves the
// runtime's, and a GOMEMLIMIT, which the runtime has already applied,
// wins over both.
func TestMemoryLimit(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want int
	}{
		{"default", nil, service.DefaultMemoryLimitMiB},
		{"set", map[string]string{"MEMORY_LIMIT_MIB": "200"}, 200},
		{"off", map[string]string{"MEMORY_LIMIT_MIB": "0"}, 0},
		{"GOMEMLIMIT wins", map[string]string{"MEMORY_LIMIT_MIB": "200", "GOMEMLIMIT": "1GiB"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := service.LoadConsumerConfig(dev(tt.env), audit())
			if err != nil {
				t.Fatal(err)
			}
			if c.MemoryLimitMiB != tt.want {
				t.Errorf("MemoryLimitMiB = %d, want %d", c.MemoryLimitMiB, tt.want)
			}
		})
	}
	if _, err := service.LoadConsumerConfig(dev(map[string]string{"MEMORY_LIMIT_MIB": "-1"}), audit()); err == nil ||
		!strings.Contains(err.Error(), "MEMORY_LIMIT_MIB") {
		t.Errorf("a negative limit: %v, want an error naming MEMORY_LIMIT_MIB", err)
	}
}

func TestLoadConsumerConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// want are the variables the error names; none: it loads.
		want []string
	}{
		{"log level in capitals", map[string]string{"LOG_LEVEL": "INFO"}, nil},
		{"every problem at once", map[string]string{"HTTP_ADDR": "8083", "LOG_LEVEL": "loud", "FAILPOINTS": "x.apply",
			"DB_NAME": strings.Repeat("x", 64), "RETRY_MAX_ATTEMPTS": "many", "DLQ_TOPIC": "order-events"},
			[]string{"HTTP_ADDR", "LOG_LEVEL", "FAILPOINTS", "DB_NAME", "RETRY_MAX_ATTEMPTS", "DLQ_TOPIC"}},
		{"database URL", map[string]string{"DATABASE_URL": "://nowhere"}, []string{"DATABASE_URL"}},
		{"batch size", map[string]string{"CONSUMER_BATCH_SIZE": "0"}, []string{"CONSUMER_BATCH_SIZE"}},
		{"fail points while disabled", map[string]string{"FAILPOINTS": "relay.after-publish=exit"}, []string{"FAILPOINTS_ENABLED"}},
		{"fail points enabled", map[string]string{"FAILPOINTS": "relay.after-publish=exit", "FAILPOINTS_ENABLED": "true"}, nil},
		{"the service's own fail point", map[string]string{"FAILPOINTS": "audit.apply=error*2", "FAILPOINTS_ENABLED": "true"}, nil},
		{"the consumer kit's fail point", map[string]string{"FAILPOINTS": "consumer.after-commit=exit", "FAILPOINTS_ENABLED": "true"}, nil},
		{"misspelt fail point", map[string]string{"FAILPOINTS": "audit.aply=error", "FAILPOINTS_ENABLED": "true"},
			[]string{"FAILPOINTS", `"audit.aply": unknown fail point (known: audit.apply, consumer.after-commit, relay.after-publish, relay.before-publish)`}},
		{"another service's fail point", map[string]string{"FAILPOINTS": "order.before-commit=error", "FAILPOINTS_ENABLED": "true"},
			[]string{"FAILPOINTS", "unknown fail point"}},
		{"unknown mode", map[string]string{"SUITE_MODE": "demo"}, []string{"SUITE_MODE"}},
		{"development on every interface without a token", map[string]string{"HTTP_ADDR": ":8099"}, []string{"ADMIN_TOKEN", "HTTP_ADDR"}},
		{"development on every interface with a token", map[string]string{"HTTP_ADDR": ":8099", "ADMIN_TOKEN": "short"}, nil},
		{"development on localhost", map[string]string{"HTTP_ADDR": "localhost:8099"}, nil},
		{"development on another interface", map[string]string{"HTTP_ADDR": "10.1.2.3:8099"}, []string{"ADMIN_TOKEN"}},
		{"database timeouts", map[string]string{"DB_CONNECT_TIMEOUT": "soon", "DB_STATEMENT_TIMEOUT": "0s"},
			[]string{"DB_CONNECT_TIMEOUT", "DB_STATEMENT_TIMEOUT"}},
		{"admission", map[string]string{"HTTP_MAX_IN_FLIGHT": "64", "HTTP_QUEUE_WAIT": "0s"}, nil},
		{"admission malformed", map[string]string{"HTTP_MAX_IN_FLIGHT": "many", "HTTP_QUEUE_WAIT": "soon"},
			[]string{"HTTP_MAX_IN_FLIGHT", "HTTP_QUEUE_WAIT"}},
		{"admission out of range", map[string]string{"HTTP_MAX_IN_FLIGHT": "-1", "HTTP_QUEUE_WAIT": "5s"},
			[]string{"HTTP_MAX_IN_FLIGHT", "HTTP_QUEUE_WAIT"}},
		{"idempotency key window", map[string]string{"IDEMPOTENCY_KEY_TTL": "48h"}, nil},
		{"idempotency key window malformed", map[string]string{"IDEMPOTENCY_KEY_TTL": "a day"}, []string{"IDEMPOTENCY_KEY_TTL"}},
		{"idempotency key window too short", map[string]string{"IDEMPOTENCY_KEY_TTL": "30s"}, []string{"IDEMPOTENCY_KEY_TTL"}},
		{"idempotency key window too long", map[string]string{"IDEMPOTENCY_KEY_TTL": "8760h"}, []string{"IDEMPOTENCY_KEY_TTL"}},
		{"retention", map[string]string{"RETENTION_INTERVAL": "1m", "RETENTION_BATCH": "500", "RETENTION_OUTBOX_SENT": "72h",
			"RETENTION_PROCESSED_EVENTS": "336h", "RETENTION_DEAD_LETTERS": "2160h"}, nil},
		{"retention malformed", map[string]string{"RETENTION_INTERVAL": "often", "RETENTION_BATCH": "many"},
			[]string{"RETENTION_INTERVAL", "RETENTION_BATCH"}},
		{"retention out of range", map[string]string{"RETENTION_INTERVAL": "10ms", "RETENTION_BATCH": "100000",
			"RETENTION_OUTBOX_SENT": "1m", "RETENTION_PROCESSED_EVENTS": "12h", "RETENTION_DEAD_LETTERS": "9000h"},
			[]string{"RETENTION_INTERVAL", "RETENTION_BATCH", "RETENTION_OUTBOX_SENT", "RETENTION_PROCESSED_EVENTS", "RETENTION_DEAD_LETTERS"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.LoadConsumerConfig(dev(tt.env), audit())
			requireNamed(t, err, tt.want)
		})
	}
}

// TestSecretsOutsideDevelopment checks that outside development mode a
// service refuses a missing, short or published ADMIN_TOKEN and
// CALLBACK_SECRET, naming the variable and never printing the value.
func TestSecretsOutsideDevelopment(t *testing.T) {
	good := strings.Repeat("a1", 16)
	tests := []struct {
		name string
		env  map[string]string
		// want are the variables the error names; none: it loads.
		want []string
	}{
		{"nothing set", nil, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
		{"production named", map[string]string{"SUITE_MODE": "production"}, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
		{"short values", map[string]string{"ADMIN_TOKEN": "short-admin-token", "CALLBACK_SECRET": "short-callback"}, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
		{"published values", map[string]string{"ADMIN_TOKEN": "dev-admin-token", "CALLBACK_SECRET": "dev-callback-secret"}, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
		{"short previous secret", map[string]string{"ADMIN_TOKEN": good, "CALLBACK_SECRET": good, "CALLBACK_SECRET_PREVIOUS": good + ",tiny-old"}, []string{"CALLBACK_SECRET_PREVIOUS"}},
		{"zero replay window", map[string]string{"ADMIN_TOKEN": good, "CALLBACK_SECRET": good, "CALLBACK_REPLAY_WINDOW": "0s"}, []string{"CALLBACK_REPLAY_WINDOW"}},
		{"generated values", map[string]string{"ADMIN_TOKEN": good, "CALLBACK_SECRET": good + "b", "CALLBACK_SECRET_PREVIOUS": good + "c"}, nil},
		{"development defaults", map[string]string{"SUITE_MODE": "development"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			shared := service.ReadConfig(r, audit())
			cb := service.ReadCallbackConfig(r, shared)
			err := errors.Join(r.Err(), shared.Validate(), cb.Validate())
			if requireNamed(t, err, tt.want); err == nil {
				return
			}
			for k, v := range tt.env {
				if k != "SUITE_MODE" && k != "CALLBACK_REPLAY_WINDOW" && strings.Contains(err.Error(), v) {
					t.Errorf("error %q prints the value of %s", err, k)
				}
			}
		})
	}
}

// TestSecretsFromFiles gives a production service its secrets as compose
// does: *_FILE variables naming files, DATABASE_URL without a password.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o400); err != nil {
			t.Fatal(err)
		}
		return path
	}
	admin := strings.Repeat("ad", 32)
	callback := strings.Repeat("cb", 32)
	compose := map[string]string{
		"DATABASE_URL":           "postgres://postgres@postgres:5432/postgres?sslmode=disable",
		"DATABASE_PASSWORD_FILE": write("postgres_password", "pw-from-file\n"),
		"ADMIN_TOKEN_FILE":       write("admin_token", admin+"\n"),
		"CALLBACK_SECRET_FILE":   write("callback_secret", callback+"\n"),
	}
	with := func(changes map[string]string) map[string]string {
		env := maps.Clone(compose)
		for k, v := range changes {
			if v == "" {
				delete(env, k)
			} else {
				env[k] = v
			}
		}
		return env
	}
	tests := []struct {
		name string
		env  map[string]string
		// want are the variables the error names; none: it loads.
		want []string
		// dsn is the service database's URL when it loads.
		dsn string
	}{
		{"every secret from a file", compose, nil, "postgres://postgres:pw-from-file@postgres:5432/audit?sslmode=disable"},
		{"a password in the variable", with(map[string]string{"DATABASE_PASSWORD_FILE": "", "DATABASE_PASSWORD": "pw"}), nil, "postgres://postgres:pw@postgres:5432/audit?sslmode=disable"},
		{"no password: the url as it is", with(map[string]string{"DATABASE_PASSWORD_FILE": ""}), nil, "postgres://postgres@postgres:5432/audit?sslmode=disable"},
		{"a token file and a token", with(map[string]string{"ADMIN_TOKEN": admin}), []string{"ADMIN_TOKEN and ADMIN_TOKEN_FILE are both set"}, ""},
		{"a missing secret file", with(map[string]string{"CALLBACK_SECRET_FILE": filepath.Join(dir, "missing")}), []string{"CALLBACK_SECRET_FILE", "CALLBACK_SECRET is not set"}, ""},
		{"a short token in its file", with(map[string]string{"ADMIN_TOKEN_FILE": write("short", "short\n")}), []string{"ADMIN_TOKEN is 5 bytes"}, ""},
		{"a password in the url and a password file", with(map[string]string{"DATABASE_URL": "postgres://postgres:other@postgres:5432/postgres"}), []string{"DATABASE_URL", "holds a password"}, ""},
		{"a password file and a url without a user", with(map[string]string{"DATABASE_URL": "postgres://postgres:5432/postgres"}), []string{"DATABASE_URL", "names no user"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			shared := service.ReadConfig(r, audit())
			cb := service.ReadCallbackConfig(r, shared)
			err := errors.Join(r.Err(), shared.Validate(), cb.Validate())
			requireNamed(t, err, tt.want)
			if err != nil {
				for _, secret := range []string{admin, callback, "pw-from-file", "other"} {
					if strings.Contains(err.Error(), secret) {
						t.Fatalf("error %q prints a secret", err)
					}
				}
				return
			}
			if shared.AdminToken != admin || cb.Secret != callback {
				t.Fatalf("ADMIN_TOKEN %q, CALLBACK_SECRET %q: not the files' contents", shared.AdminToken, cb.Secret)
			}
			if dsn, err := shared.DatabaseDSN(); err != nil || dsn != tt.dsn {
				t.Fatalf("DatabaseDSN = %q, %v; want %q", dsn, err, tt.dsn)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8081", true},
		{"localhost:8081", true},
		{"[::1]:8081", true},
		{":8081", false},
		{"0.0.0.0:8081", false},
		{"[::]:8081", false},
		{"192.168.1.5:8081", false},
		{"8081", false},
	}
	for _, tt := range tests {
		if got := service.IsLoopback(tt.addr); got != tt.want {
			t.Errorf("IsLoopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// A malformed DATABASE_URL is named in the error, its password is not.
func TestDatabaseURLErrorHidesThePassword(t *testing.T) {
	const password = "hunter2-pw"
	env := map[string]string{"DATABASE_URL": "postgres://app:" + password + "@db:54x2/postgres"}
	_, err := service.LoadConsumerConfig(func(k string) string { return env[k] }, audit())
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Fatalf("LoadConsumerConfig = %v, want an error naming DATABASE_URL", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Fatalf("error %q shows the password", err)
	}
}
