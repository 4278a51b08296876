package main

import "github.com/reliable-orders/fulfillment/pkg/service"

// serviceName names the service in logs and is its default consumer group.
const serviceName = "payment-service"

// loadConfig reads the environment through getenv, the only place the
// service does, and reports every malformed value at once. The payment
// service has no settings of its own: it declares the defaults of DB_NAME
// and HTTP_ADDR; the rest is what every consumer shares and where and how
// the callback relay delivers (README.md, Configuration).
func loadConfig(getenv func(string) string) (service.SenderConfig, error) {
	return service.LoadSenderConfig(getenv, service.Identity{Name: serviceName, Database: "payments", Port: 8082, FailPoints: failPoints()})
}
