package main

import (
	"errors"
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
)

// config is the order service's environment (README.md, Configuration):
// what every service shares, where its events go, the services its
// snapshot reads and how callbacks are verified.
type config struct {
	service.Config
	Events    messaging.Env
	Relay     outbox.RelayConfig
	Peers     adapters.PeerURLs
	Callbacks service.CallbackConfig
}

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed value at once. The service is
// named after the producer of its events.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	shared := service.ReadConfig(r, service.Identity{Name: adapters.Producer, Database: "orders", Port: 8081, FailPoints: failPoints()})
	cfg := config{
		Config: shared,
		Events: messaging.ReadEnv(r),
		Relay:  outbox.ReadRelayEnv(r),
		Peers: adapters.PeerURLs{
			Payment:        r.URL("PAYMENT_URL", "http://127.0.0.1:8082"),
			Inventory:      r.URL("INVENTORY_URL", "http://127.0.0.1:8083"),
			Points:         r.URL("POINTS_URL", "http://127.0.0.1:8084"),
			Notification:   r.URL("NOTIFICATION_URL", "http://127.0.0.1:8085"),
			Reconciliation: r.URL("RECONCILIATION_URL", "http://127.0.0.1:8086"),
		},
		Callbacks: service.ReadCallbackConfig(r, shared),
	}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every unusable setting, naming its variable.
func (c config) Validate() error {
	return errors.Join(c.Config.Validate(), c.Events.Validate(), c.Relay.Validate(), c.Callbacks.Validate())
}
