package servicetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/service"
)

// ExpectConsumerDefaults fails t unless a consumer's configuration, read
// by load in development mode with nothing else set, has the defaults its
// identity declares (HTTP_ADDR on loopback at id.Port, DB_NAME id.Database,
// consumer group id.Name, info logs, no admin token, no fail points), and
// unless, outside development mode, load refuses to start without an
// ADMIN_TOKEN. The rules are pkg/service's and tested there; this checks
// that a service declares its identity and reads the environment through
// them.
func ExpectConsumerDefaults(t *testing.T, load func(getenv func(string) string) (service.ConsumerConfig, error), id service.Identity) {
	t.Helper()
	c, err := load(func(k string) string {
		if k == "SUITE_MODE" {
			return "development"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("configuration in development mode: %v", err)
	}
	if want := fmt.Sprintf("127.0.0.1:%d", id.Port); c.HTTPAddr != want || c.DBName != id.Database || c.Consumer.ConsumerGroup != id.Name ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v; want HTTP_ADDR %s, DB_NAME %s, group %s, info logs, no token, no fail points", c, want, id.Database, id.Name)
	}
	if _, err := load(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN") {
		t.Fatalf("configuration without ADMIN_TOKEN outside development mode: %v; want an error naming ADMIN_TOKEN", err)
	}
}
