package devrun

import (
	"fmt"
	"path/filepath"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// StartBroker starts the embedded broker on addr with both topics of the
// suite, persisting under dataDir/broker.
func StartBroker(addr, dataDir string) (*broker.Broker, error) {
	b, err := broker.Start(brokerConfig(addr, dataDir))
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s (is another broker there? set KAFKA_BROKERS to use it): %w", addr, err)
	}
	return b, nil
}

// brokerConfig is the embedded broker's configuration: both topics of the
// suite, the log under dataDir/broker.
func brokerConfig(addr, dataDir string) broker.Config {
	return broker.Config{
		Addr:       addr,
		DataDir:    filepath.Join(dataDir, "broker"),
		Partitions: suite.Partitions,
		Topics:     []string{suite.OrderEventsTopic, suite.DLQTopic},
	}
}
