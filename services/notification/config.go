package main

import "github.com/reliable-orders/fulfillment/pkg/service"

// serviceName names the service in logs and is its default consumer group.
const serviceName = "notification-service"

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed or missing value at once. The
// notification service has no settings of its own: it declares the defaults
// of DB_NAME and HTTP_ADDR, and every other setting is one every consumer
// shares (README.md, Configuration).
func loadConfig(getenv func(string) string) (service.ConsumerConfig, error) {
	return service.LoadConsumerConfig(getenv, service.Identity{Name: serviceName, Database: "notification", Port: 8085, FailPoints: failPoints()})
}
