// Package suite is the one table of the suite's six services: their names,
// ports, databases and consumer groups. The runner (scripts/run) starts what
// it lists, and the deployment consistency test checks docker-compose.yml and
// deploy/ against it, so the three modes cannot drift apart.
package suite

import (
	"fmt"
	"strconv"

	"github.com/reliable-orders/fulfillment/pkg/messaging"
)

// Topics, broker and database defaults shared by every mode
// (README.md (Configuration)).
const (
	// OrderEventsTopic carries every order event (ORDER_EVENTS_TOPIC).
	OrderEventsTopic = "order-events"
	// DLQTopic is the dead-letter topic (DLQ_TOPIC).
	DLQTopic = "order-events.dlq"
	// Partitions is the partition count of both topics (messaging.Partitions).
	Partitions = messaging.Partitions
	// MaxInstances bounds the processes one consumer service is scaled to
	// (make run's scale-out, the backlog drill). Three consumers of twelve
	// processes, each with a few database connections (DB_MAX_CONNS), is
	// what a local Postgres's 100 connections hold.
	MaxInstances = 12
	// DefaultKafkaBrokers is where the embedded broker listens (KAFKA_BROKERS).
	DefaultKafkaBrokers = "127.0.0.1:9092"
	// DefaultDatabaseURL is the Postgres server of a developer machine
	// (DATABASE_URL).
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

// The learner's console (services/console), which every mode runs next to
// the six services: it has no database and consumes nothing, it reads the
// services' APIs (ORDER_URL, …) with their ADMIN_TOKEN.
const (
	// ConsoleName names its binary, its compose service and its image
	// (fulfillment/console).
	ConsoleName = "console"
	// ConsolePort is its HTTP port in every mode.
	ConsolePort = 8087
	// ConsolePackage is its main package, relative to the repository root.
	ConsolePackage = "./services/console"
)

// Service is one service of the suite as every mode runs it.
type Service struct {
	// Name is the short name: the directory under services/ ("order").
	Name string
	// Port is the HTTP port, the same in make run, compose and Kubernetes.
	Port int
	// DBName is the service's own database (DB_NAME).
	DBName string
	// ConsumerGroup is its Kafka consumer group (CONSUMER_GROUP); empty for a
	// service that consumes nothing.
	ConsumerGroup string
	// URLEnv names the variable through which other services find it
	// ("ORDER_URL").
	URLEnv string
}

// FullName is the name of the binary, the compose service, the Kubernetes
// Deployment and Service, and the image ("order-service").
func (s Service) FullName() string { return s.Name + "-service" }

// Package is the main package to build, relative to the repository root.
func (s Service) Package() string { return "./services/" + s.Name }

// HTTPAddr is the listen address the service gets in a container
// (HTTP_ADDR under compose and Kubernetes): every interface, behind
// ADMIN_TOKEN.
func (s Service) HTTPAddr() string { return ":" + strconv.Itoa(s.Port) }

// LocalAddr is the listen address `make run` gives the service: this
// machine only, since its admin API is open there.
func (s Service) LocalAddr() string { return LoopbackAddr(s.Port) }

// LoopbackAddr is the loopback listen address of port.
func LoopbackAddr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// LocalURL is the service's base URL on this machine.
func (s Service) LocalURL() string { return fmt.Sprintf("http://127.0.0.1:%d", s.Port) }

// Services returns the six services in start order. Each call returns a new
// slice, so callers may change it.
func Services() []Service {
	return []Service{
		{Name: "order", Port: 8081, DBName: "orders", URLEnv: "ORDER_URL"},
		{Name: "payment", Port: 8082, DBName: "payments", ConsumerGroup: "payment-service", URLEnv: "PAYMENT_URL"},
		{Name: "inventory", Port: 8083, DBName: "inventory", ConsumerGroup: "inventory-service", URLEnv: "INVENTORY_URL"},
		{Name: "points", Port: 8084, DBName: "points", ConsumerGroup: "points-service", URLEnv: "POINTS_URL"},
		{Name: "notification", Port: 8085, DBName: "notifications", ConsumerGroup: "notification-service", URLEnv: "NOTIFICATION_URL"},
		// Last: it reads every other service.
		{Name: "reconciliation", Port: 8086, DBName: "reconciliation", URLEnv: "RECONCILIATION_URL"},
	}
}

// Lookup finds a service of list by its short name.
func Lookup(list []Service, name string) (Service, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}
