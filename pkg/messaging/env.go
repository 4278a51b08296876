package messaging

import (
	"errors"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

// Env is where the order events travel: the settings the producer (the
// order service) and every consumer share, read by one function so their
// names and defaults cannot drift (README.md, Configuration).
type Env struct {
	Brokers          []string
	OrderEventsTopic string
}

// ReadEnv reads KAFKA_BROKERS and ORDER_EVENTS_TOPIC through r.
func ReadEnv(r *envconfig.Reader) Env {
	return Env{
		Brokers:          r.List("KAFKA_BROKERS", []string{"127.0.0.1:9092"}),
		OrderEventsTopic: r.String("ORDER_EVENTS_TOPIC", "order-events"),
	}
}

// Validate reports every unusable setting, naming its variable.
func (e Env) Validate() error {
	var errs []error
	if len(e.Brokers) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS must name at least one broker"))
	}
	if e.OrderEventsTopic == "" {
		errs = append(errs, errors.New("ORDER_EVENTS_TOPIC must name a topic"))
	}
	return errors.Join(errs...)
}
