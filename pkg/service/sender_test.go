package service_test

import (
	"cmp"
	"errors"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// TestCallbackSenderConfig checks the defaults of a service that sends
// callbacks to the order service, and that every unusable setting is
// named.
func TestCallbackSenderConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		// want are what the error names; none: it loads.
		want []string
	}{
		{"development defaults", nil, nil},
		{"an order URL with a trailing slash", map[string]string{"ORDER_URL": "http://orders.internal:8081/"}, nil},
		{"an order URL without a scheme", map[string]string{"ORDER_URL": "orders.internal:8081"}, []string{"ORDER_URL"}},
		{"a relay that never backs off", map[string]string{"OUTBOX_BACKOFF_INITIAL": "0s"}, []string{"OUTBOX_BACKOFF_INITIAL"}},
		{"a replay window of a day", map[string]string{"CALLBACK_REPLAY_WINDOW": "24h"}, []string{"CALLBACK_REPLAY_WINDOW"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(dev(tt.env))
			cfg := service.ReadCallbackSenderConfig(r, service.ReadConfig(r, audit()))
			err := errors.Join(r.Err(), cfg.Validate())
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if cfg.OrderURL != strings.TrimRight(cmp.Or(tt.env["ORDER_URL"], service.DefaultOrderURL), "/") ||
					cfg.Timeout != service.DefaultOrderServiceTimeout || cfg.Callbacks.Secret == "" || cfg.Relay.BatchSize == 0 {
					t.Fatalf("config %+v", cfg)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded, want an error")
			}
			for _, v := range tt.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("error %q does not name %s", err, v)
				}
			}
		})
	}
	if err := (service.CallbackSenderConfig{}).Validate(); err == nil || !strings.Contains(err.Error(), "ORDER_URL") ||
		!strings.Contains(err.Error(), "timeout") {
		t.Errorf("the zero config: %v, want ORDER_URL and the timeout named", err)
	}
}
