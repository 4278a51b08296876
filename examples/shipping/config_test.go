package main

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestLoadConfig checks shipping's identity; the settings every consumer shares
// are read and tested in pkg/service and pkg/consumer.
func TestLoadConfig(t *testing.T) {
	servicetest.ExpectConsumerDefaults(t, loadConfig, service.Identity{Name: "shipping-service", Database: "shipping", Port: 8087})
}
