package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/testkit/consumertest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestAdminLagFollowsTheBacklog publishes a small backlog and reads it
// drain on GET /admin/lag and the lag gauges: the consumer group, every
// partition of the topic, and a consumed rate once the group caught up.
func TestAdminLagFollowsTheBacklog(t *testing.T) {
	s := servicetest.Start(t, run, nil)
	const orders = 8
	setStock(s, "SKU-LAG", orders)
	for i := range orders {
		s.Publish(consumertest.OrderPaid(t, fmt.Sprintf("O-LAG-%d", i), "80.00", consumertest.Item("SKU-LAG", 1)))
	}

	var r lag.Report
	s.WaitFor("the group to catch up", func() bool {
		s.GetJSON("/admin/lag", &r)
		return r.TotalLag == 0 && r.ConsumedPerSecond > 0
	})
	if got := stock(s, "SKU-LAG"); got.Deducted != orders {
		t.Fatalf("stock = %+v, want %d deducted", got, orders)
	}
	if r.Group != "inventory-service" || r.Topic != s.Topic || len(r.Partitions) != 4 || r.OldestAgeSeconds != 0 {
		t.Errorf("report = %+v, want group inventory-service, topic %s, 4 partitions, no oldest age", r, s.Topic)
	}
	var end int64
	for i, p := range r.Partitions {
		if p.Partition != int32(i) || p.Lag != 0 {
			t.Errorf("partition %+v, want partition %d without lag", p, i)
		}
		end += p.EndOffset
	}
	if end != orders {
		t.Errorf("end offsets add up to %d, want the %d published events", end, orders)
	}

	_, metrics := s.Do(http.MethodGet, "/metrics", "")
	for _, want := range []string{`consumer_lag_total{group="inventory-service"} 0`,
		`consumer_oldest_unprocessed_age_seconds{group="inventory-service"} 0`,
		`consumer_lag{group="inventory-service",partition="3"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
