package main

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestLoadConfig checks inventory's identity; the settings every consumer shares
// are read and tested in pkg/service and pkg/consumer.
func TestLoadConfig(t *testing.T) {
	servicetest.ExpectConsumerDefaults(t, func(getenv func(string) string) (service.ConsumerConfig, error) {
		c, err := loadConfig(getenv)
		return c.ConsumerConfig, err
	}, service.Identity{Name: "inventory-service", Database: "inventory", Port: 8083})
}
