package adapters_test

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
	"github.com/reliable-orders/fulfillment/services/order/internal/adapters"
	"github.com/reliable-orders/fulfillment/services/order/internal/domain/order"
)

func fastRelay() outbox.RelayConfig {
	cfg := outbox.DefaultRelayConfig()
	cfg.PollInterval = 10 * time.Millisecond
	cfg.BackoffInitial = 10 * time.Millisecond
	cfg.BackoffMax = 50 * time.Millisecond
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func pendingCount(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM outbox_events WHERE status = 'PENDING'`); err != nil {
		t.Fatal(err)
	}
	return n
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestRelayPublishesToKafka runs the relay over the lazy Kafka publisher and
// reads the events back with a plain Kafka client.
func TestRelayPublishesToKafka(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	topicName := postgrestest.UniqueName("order_events")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topicName}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	repo := adapters.NewRepository(db, topicName, nil, nil)
	for _, id := range []string{"O-1", "O-2"} {
		if _, err := orders(repo).Create(ctx(t), newOrder(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := repo.Update(ctx(t), "O-1", func(o *order.Order) ([]order.Event, error) { return o.Checkout() }); err != nil {
		t.Fatal(err)
	}
	if _, err := orders(repo).ApplyCallback(ctx(t), paymentCallback("E-pay-1")); err != nil {
		t.Fatal(err)
	}

	pub := messaging.NewLazyPublisher(b.Addrs(), watermill.NopLogger{})
	defer pub.Close()
	relay, err := outbox.NewRelay(db, outbox.NewPublisherSink(pub), fastRelay(), quietLogger(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return relay.Run(runCtx) })
	defer func() {
		stop()
		if err := g.Wait(); err != nil {
			t.Errorf("relay: %v", err)
		}
	}()
	poll.Until(t, 20*time.Second, "every outbox row SENT", func() bool { return pendingCount(t, db) == 0 })

	records := servicetest.Consume(t, b.Addrs(), topicName, 4)
	rows := map[string]outboxRow{}
	for _, id := range []string{"O-1", "O-2"} {
		for _, r := range outboxRows(t, db, id) {
			rows[r.EventID] = r
		}
	}
	var o1Versions []int64
	o1Partition := int32(-1)
	for _, r := range records {
		env, err := event.Parse(r.Value)
		if err != nil {
			t.Fatalf("record value: %v", err)
		}
		row, ok := rows[env.EventID]
		if !ok {
			t.Fatalf("record %s is not an outbox row", env.EventID)
		}
		if string(r.Key) != env.AggregateID {
			t.Errorf("key %q, want aggregateId %q", r.Key, env.AggregateID)
		}
		if header(r, "eventId") != env.EventID || header(r, "eventType") != string(env.EventType) ||
			header(r, "eventVersion") != strconv.Itoa(env.EventVersion) || header(r, "traceparent") != env.Traceparent() {
			t.Errorf("headers %+v do not repeat envelope %+v", r.Headers, env)
		}
		if string(env.EventType) != row.EventType || env.AggregateVersion != row.AggregateVersion || env.Producer != "order-service" {
			t.Errorf("envelope %+v, row %+v", env, row)
		}
		if env.AggregateID == "O-1" {
			o1Versions = append(o1Versions, env.AggregateVersion)
			if o1Partition >= 0 && r.Partition != o1Partition {
				t.Errorf("O-1's events on partitions %d and %d", o1Partition, r.Partition)
			}
			o1Partition = r.Partition
		}
	}
	if len(o1Versions) != 3 || o1Versions[0] != 1 || o1Versions[1] != 2 || o1Versions[2] != 3 {
		t.Errorf("O-1 versions on the wire %v, want [1 2 3]", o1Versions)
	}
}
