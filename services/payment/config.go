package main

import (
	"errors"
	"fmt"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// serviceName names the service in logs and is its default consumer group.
const serviceName = "payment-service"

// config is the payment service's environment: what every consumer shares,
// and where and how the callback relay delivers (README.md, Configuration).
type config struct {
	service.ConsumerConfig
	service.CallbackSenderConfig
}

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed value at once.
func loadConfig(getenv func(string) string) (config, error) {
	r := envconfig.New(getenv)
	shared := service.ReadConsumerConfig(r, service.Identity{Name: serviceName, Database: "payments", Port: 8082})
	cfg := config{ConsumerConfig: shared, CallbackSenderConfig: service.ReadCallbackSenderConfig(r, shared.Config)}
	if err := errors.Join(r.Err(), cfg.Validate()); err != nil {
		return config{}, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

// Validate reports every unusable setting, naming its variable.
func (c config) Validate() error {
	return errors.Join(c.ConsumerConfig.Validate(), c.CallbackSenderConfig.Validate())
}
