package service_test

import (
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/service"
)

// audit is the identity of a service the tests declare.
func audit() service.Identity {
	return service.Identity{Name: "audit-service", Database: "audit", Port: 8099}
}

func TestLoadConsumerConfigDefaults(t *testing.T) {
	c, err := service.LoadConsumerConfig(func(string) string { return "" }, audit())
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "audit-service" || c.DBName != "audit" || c.HTTPAddr != ":8099" || c.LogLevel != "info" ||
		c.AdminToken != "" || c.FailPoints != "" || c.Consumer.ConsumerGroup != "audit-service" {
		t.Fatalf("defaults = %+v", c)
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
		{"database timeouts", map[string]string{"DB_CONNECT_TIMEOUT": "soon", "DB_STATEMENT_TIMEOUT": "0s"},
			[]string{"DB_CONNECT_TIMEOUT", "DB_STATEMENT_TIMEOUT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.LoadConsumerConfig(func(k string) string { return tt.env[k] }, audit())
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("LoadConsumerConfig: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("LoadConsumerConfig succeeded, want an error")
			}
			for _, v := range tt.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
		})
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
