// Package faultproxytest starts a fault proxy in front of an embedded
// Kafka broker for tests of the proxy and of what arms it.
package faultproxytest

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy"
)

// Start runs a kfake broker holding topics of the given partitions and the
// fault proxy in front of it until the test ends.
func Start(t testing.TB, partitions int, topics ...string) *faultproxy.Proxy {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(partitions), topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	p, err := faultproxy.Listen(faultproxy.Config{Listen: "127.0.0.1:0", Upstream: cluster.ListenAddrs()[0], DialTimeout: 3 * time.Second}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fault proxy: %v", err)
		}
	})
	return p
}
