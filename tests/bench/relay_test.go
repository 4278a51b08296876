package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	watermillsql "github.com/ThreeDotsLabs/watermill-sql/v3/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// Fairness of the comparison (docs/benchmarks.md): both relays
//
//   - move the same rows: the same OrderPaid envelopes (same payload bytes,
//     same headers, keyed by aggregateId), the same count;
//   - read them from the same Postgres server, each from a fresh database
//     holding only its own rows, committed and ANALYZEd before the clock
//     starts, in chunks of the same size;
//   - produce to the same embedded broker through the same producer
//     (pkg/messaging's Publisher: idempotent, acks=all, one request in
//     flight), to a fresh topic of the same partition count each;
//   - run as they run in a service: our Relay.Run with the defaults the
//     services use, Watermill's Forwarder.Run with its SQL subscriber at
//     each of forwarderBatchSizes (its default is 100) and the same poll
//     interval, and ours is compared with the forwarder's best;
//   - are timed from the moment they are started until the topic's end
//     offsets add up to the row count, i.e. the broker has acknowledged
//     every record; the offsets are polled every relayPollEvery.
//
// The forwarder runs first in each round, at every batch size, so whatever
// a warm cache is worth goes to it, not to us.

const (
	// relayPartitions is the partition count of make run's topics.
	relayPartitions = 64
	// relayChunk is how many rows one setup transaction commits.
	relayChunk = 1000
	// relayPollEvery is the resolution of the stop clock.
	relayPollEvery = 5 * time.Millisecond
	// relayTimeout bounds one relay's run.
	relayTimeout = 10 * time.Minute
)

// forwarderBatchSizes are the SQL subscriber's batch sizes the forwarder
// is swept over: its default, and up to our relay's own batch size, so the
// ratio is against the forwarder tuned as well as this sweep can.
var forwarderBatchSizes = []int{100, 500, 2000}

// BenchmarkRelay prints events per second from committed rows to broker
// acknowledgement for our relay (events/s) and for Watermill's SQL
// forwarder relaying the same rows at each of forwarderBatchSizes
// (forwarder-<batch>-events/s), and the ratio of ours to the forwarder's
// best batch size.
func BenchmarkRelay(b *testing.B) {
	set := loadSettings(b)
	postgrestest.ServerURL(b) // fails when no Postgres answers
	br, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: relayPartitions})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Close)
	adm := newAdmin(b, br)
	msgs := relayMessages(b, set.RelayRows)
	cfg := outbox.DefaultRelayConfig()

	var ours time.Duration
	theirs := make([]time.Duration, len(forwarderBatchSizes))
	b.ResetTimer()
	for range b.N {
		for i, size := range forwarderBatchSizes {
			theirs[i] += runForwarder(b, br, adm, size, cfg.PollInterval, msgs)
		}
		ours += runRelay(b, br, adm, cfg, msgs)
	}
	b.StopTimer()
	rows := float64(set.RelayRows * b.N)
	oursRate := rows / ours.Seconds()
	b.ReportMetric(0, "ns/op") // one op is a whole round: meaningless here
	b.ReportMetric(oursRate, "events/s")
	var best float64
	var bestSize int
	rates := make([]string, len(forwarderBatchSizes))
	for i, size := range forwarderBatchSizes {
		rate := rows / theirs[i].Seconds()
		b.ReportMetric(rate, fmt.Sprintf("forwarder-%d-events/s", size))
		rates[i] = fmt.Sprintf("batch %d %.0f ev/s (%v)", size, rate, theirs[i].Round(time.Millisecond))
		if rate > best {
			best, bestSize = rate, size
		}
	}
	b.ReportMetric(oursRate/best, "ratio")
	b.Logf("%d rows × %d round(s), %d partitions: relay (batch %d) %.0f ev/s (%v); watermill-sql forwarder %s; ratio %.1f× against the forwarder's best, batch %d",
		set.RelayRows, b.N, relayPartitions, cfg.BatchSize, oursRate, ours.Round(time.Millisecond),
		strings.Join(rates, ", "), oursRate/best, bestSize)
}

// relayMessages builds n OrderPaid events of distinct orders, as the order
// service writes them.
func relayMessages(b *testing.B, n int) []outbox.Message {
	b.Helper()
	amount, err := event.ParseMoney("80.00")
	if err != nil {
		b.Fatal(err)
	}
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		order := fmt.Sprintf("O-bench-%06d", i)
		env, err := event.New(event.OrderPaid, event.Meta{AggregateID: order, AggregateVersion: 3, Producer: "order-service"},
			event.OrderPaidData{PaymentID: "P-" + order, PaidAmount: amount, Currency: "CNY", CustomerID: "C-1",
				Items: []event.Item{{SKU: "SKU-1", Quantity: 2}}})
		if err != nil {
			b.Fatal(err)
		}
		// The topic is set per run; the payload and headers are the same.
		if msgs[i], err = outbox.FromEnvelope("", env); err != nil {
			b.Fatal(err)
		}
	}
	return msgs
}

// watermillMessage is the message PublisherSink makes of an outbox row, so
// the forwarder publishes exactly the records our relay publishes.
func watermillMessage(m outbox.Message) *message.Message {
	wm := message.NewMessage(m.EventID, m.Payload)
	for k, v := range m.Headers {
		wm.Metadata.Set(k, v)
	}
	return wm
}

// runRelay commits msgs to a fresh outbox, then times pkg/outbox's relay
// until the broker holds them all.
func runRelay(b *testing.B, br *broker.Broker, adm *kadm.Client, cfg outbox.RelayConfig, msgs []outbox.Message) time.Duration {
	b.Helper()
	b.StopTimer()
	db, _ := postgrestest.NewDatabase(b, outbox.Schema())
	topic := newTopic(b, adm, "relay-ours", relayPartitions)
	ctx := context.Background()
	for start := 0; start < len(msgs); start += relayChunk {
		chunk := msgs[start:min(start+relayChunk, len(msgs))]
		if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
			for _, m := range chunk {
				m.Topic = topic
				if err := outbox.Add(ctx, tx, m); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	analyze(b, db, "outbox_events")
	pub := newPublisher(b, br)
	relay, err := outbox.NewRelay(db, outbox.NewPublisherSink(pub), cfg, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- relay.Run(runCtx) }()
	took := waitForRecords(b, adm, topic, len(msgs), start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("relay: %v", err)
	}
	return took
}

// runForwarder commits msgs through Watermill's forwarder publisher over the
// SQL publisher (the outbox side of the pattern), then times the forwarder
// (the SQL subscriber, reading batchSize rows a query and polling every
// pollInterval when idle, and the same Kafka producer) until the broker
// holds them all.
func runForwarder(b *testing.B, br *broker.Broker, adm *kadm.Client, batchSize int, pollInterval time.Duration, msgs []outbox.Message) time.Duration {
	b.Helper()
	b.StopTimer()
	db, _ := postgrestest.NewDatabase(b)
	topic := newTopic(b, adm, "relay-forwarder", relayPartitions)
	const sqlTopic = "forwarder_outbox"
	schema := watermillsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batchSize}
	sub, err := watermillsql.NewSubscriber(db.DB, watermillsql.SubscriberConfig{
		ConsumerGroup:  "bench",
		PollInterval:   pollInterval,
		SchemaAdapter:  schema,
		OffsetsAdapter: watermillsql.DefaultPostgreSQLOffsetsAdapter{},
	}, watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.SubscribeInitialize(sqlTopic); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for start := 0; start < len(msgs); start += relayChunk {
		chunk := msgs[start:min(start+relayChunk, len(msgs))]
		if err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
			sqlPub, err := watermillsql.NewPublisher(tx.Tx, watermillsql.PublisherConfig{SchemaAdapter: schema}, watermill.NopLogger{})
			if err != nil {
				return err
			}
			wms := make([]*message.Message, len(chunk))
			for i, m := range chunk {
				wms[i] = watermillMessage(m)
			}
			return forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: sqlTopic}).Publish(topic, wms...)
		}); err != nil {
			b.Fatal(err)
		}
	}
	analyze(b, db, `"watermill_`+sqlTopic+`"`)
	fwd, err := forwarder.NewForwarder(sub, newPublisher(b, br), watermill.NopLogger{}, forwarder.Config{ForwarderTopic: sqlTopic})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- fwd.Run(runCtx) }()
	took := waitForRecords(b, adm, topic, len(msgs), start)
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("forwarder: %v", err)
	}
	return took
}

// newPublisher is pkg/messaging's producer, the one both relays use.
func newPublisher(b *testing.B, br *broker.Broker) *messaging.Publisher {
	b.Helper()
	pub, err := messaging.NewPublisher(br.Addrs(), watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pub.Close() })
	return pub
}

func newAdmin(b *testing.B, br *broker.Broker) *kadm.Client {
	b.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addrs()...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// newTopic creates an empty topic of the given partitions.
func newTopic(b *testing.B, adm *kadm.Client, prefix string, partitions int32) string {
	b.Helper()
	topic := postgrestest.UniqueName(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create topic %s: %v", topic, err)
	}
	return topic
}

// analyze gives the planner the table's real size, as a service's
// long-lived outbox has, before the clock starts.
func analyze(b *testing.B, db *sqlx.DB, table string) {
	b.Helper()
	if _, err := db.Exec(`VACUUM ANALYZE ` + table); err != nil {
		b.Fatalf("vacuum analyze %s: %v", table, err)
	}
}

// waitForRecords polls the topic's end offsets until they add up to want
// and returns the time since start. More than want is a duplicate delivery,
// which no relay should make in a run without failures.
func waitForRecords(b *testing.B, adm *kadm.Client, topic string, want int, start time.Time) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), relayTimeout)
	defer cancel()
	tick := time.NewTicker(relayPollEvery)
	defer tick.Stop()
	var got int64
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err != nil && ctx.Err() == nil {
			b.Fatalf("list end offsets of %s: %v", topic, err)
		}
		got = 0
		ends.Each(func(o kadm.ListedOffset) { got += o.Offset })
		if got >= int64(want) {
			took := time.Since(start)
			if got > int64(want) {
				b.Fatalf("%s holds %d records, want %d: a relay published duplicates", topic, got, want)
			}
			return took
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%s holds %d of %d records after %v", topic, got, want, relayTimeout)
		case <-tick.C:
		}
	}
}
