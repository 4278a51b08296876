package suite_test

import (
	"testing"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func TestServicesAreDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, s := range suite.Services() {
		for _, key := range []string{"name " + s.Name, "port " + s.HTTPAddr(), "db " + s.DBName, "env " + s.URLEnv} {
			if other, dup := seen[key]; dup {
				t.Errorf("%s and %s share %s", other, s.Name, key)
			}
			seen[key] = s.Name
		}
		if s.ConsumerGroup != "" && s.ConsumerGroup != s.FullName() {
			t.Errorf("%s: consumer group %q, want %q (docs/design.md, Architecture)", s.Name, s.ConsumerGroup, s.FullName())
		}
	}
}

func TestServiceNames(t *testing.T) {
	tests := []struct {
		name                         string
		full, pkg, addr, url, urlEnv string
	}{
		{"order", "order-service", "./services/order", ":8081", "http://127.0.0.1:8081", "ORDER_URL"},
		{"notification", "notification-service", "./services/notification", ":8085", "http://127.0.0.1:8085", "NOTIFICATION_URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := suite.Lookup(suite.Services(), tt.name)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.name)
			}
			got := []string{s.FullName(), s.Package(), s.HTTPAddr(), s.LocalURL(), s.URLEnv}
			want := []string{tt.full, tt.pkg, tt.addr, tt.url, tt.urlEnv}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("got %q, want %q", got[i], want[i])
				}
			}
		})
	}
	if _, ok := suite.Lookup(suite.Services(), "nope"); ok {
		t.Error("Lookup found a service that does not exist")
	}
}
