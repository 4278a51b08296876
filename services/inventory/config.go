package main

import "github.com/reliable-orders/fulfillment/pkg/service"

// serviceName names the service in logs and is its default consumer group.
const serviceName = "inventory-service"

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed or missing value at once. The
// inventory service has no settings of its own: it declares the defaults
// of DB_NAME and HTTP_ADDR; the rest is what every consumer shares and
// where and how the relay of its callbacks (a paid order the stock could
// not cover) delivers them (README.md, Configuration).
func loadConfig(getenv func(string) string) (service.SenderConfig, error) {
	return service.LoadSenderConfig(getenv, service.Identity{Name: serviceName, Database: "inventory", Port: 8083, FailPoints: failPoints()})
}
