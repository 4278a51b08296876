// Package broker runs an embedded Kafka-API broker (franz-go's kfake) so the
// suite runs, and its tests pass, on a machine without Docker or Redpanda.
//
// The broker speaks the real Kafka protocol: Sarama (through Watermill),
// franz-go and kcat talk to it exactly as they would to Redpanda.
package broker

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Config says where the broker listens, where it keeps its log and which
// topics exist from the start.
type Config struct {
	// Addr is the host:port to listen on; port 0 picks a free port.
	Addr string
	// DataDir, when set, persists topics, offsets and groups across restarts.
	DataDir string
	// Partitions is the partition count of seeded and auto-created topics.
	Partitions int32
	// Topics are created at start.
	Topics []string
}

// DefaultConfig is the broker `make run` starts.
func DefaultConfig() Config {
	return Config{
		Addr:       "127.0.0.1:9092",
		DataDir:    ".data/broker",
		Partitions: 64,
		Topics:     []string{"order-events", "order-events.dlq"},
	}
}

// Validate reports a configuration the broker cannot start with.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("broker address %q: %w", c.Addr, err)
	}
	if c.Partitions < 1 {
		return errors.New("broker partitions must be at least 1")
	}
	return nil
}

// Broker is a running embedded broker.
type Broker struct {
	cluster *kfake.Cluster
}

// Start starts the broker; Close stops it and flushes its data directory.
func Start(cfg Config) (*Broker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	_, portText, _ := net.SplitHostPort(cfg.Addr)
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("broker port %q: %w", portText, err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	if len(cfg.Topics) > 0 {
		opts = append(opts, kfake.SeedTopics(cfg.Partitions, cfg.Topics...))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded broker: %w", err)
	}
	return &Broker{cluster: cluster}, nil
}

// Addrs are the bootstrap addresses clients connect to.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Cluster exposes the kfake cluster so tests can inject protocol faults.
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the broker and persists its state when a data directory is set.
func (b *Broker) Close() { b.cluster.Close() }
