package service_test

import (
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/service"
)

// TestLoadSenderConfig checks the defaults of a consumer that sends
// callbacks to the order service, and that every unusable setting is
// named.
func TestLoadSenderConfig(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		orderURL string
		// want are the variables the error names; none: it loads.
		want []string
	}{
		{"development defaults", nil, service.DefaultOrderURL, nil},
		{"an order URL with a trailing slash", map[string]string{"ORDER_URL": "http://orders.internal:8081/"}, "http://orders.internal:8081", nil},
		{"an order URL without a scheme", map[string]string{"ORDER_URL": "orders.internal:8081"}, "", []string{"ORDER_URL"}},
		{"a relay that never backs off", map[string]string{"OUTBOX_BACKOFF_INITIAL": "0s"}, "", []string{"OUTBOX_BACKOFF_INITIAL"}},
		{"a replay window of a day", map[string]string{"CALLBACK_REPLAY_WINDOW": "24h"}, "", []string{"CALLBACK_REPLAY_WINDOW"}},
		{"a consumer's setting", map[string]string{"CONSUMER_BATCH_SIZE": "0"}, "", []string{"CONSUMER_BATCH_SIZE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := service.LoadSenderConfig(dev(tt.env), audit())
			if requireNamed(t, err, tt.want); err != nil {
				return
			}
			if cfg.OrderURL != tt.orderURL || cfg.Timeout != service.DefaultOrderServiceTimeout || cfg.Callbacks.Secret != service.DevCallbackSecret ||
				cfg.Relay.BatchSize == 0 || cfg.Consumer.ConsumerGroup != "audit-service" {
				t.Fatalf("config %+v", cfg)
			}
		})
	}
	if err := (service.CallbackSenderConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "ORDER_URL") ||
		!strings.Contains(err.Error(), "timeout") {
		t.Errorf("the zero config: %v, want ORDER_URL and the timeout named", err)
	}
}
