package outbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/jmoiron/sqlx"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

var businessTable = postgres.MigrationSet{Name: "test", FS: testFS}

func setup(t testing.TB) (*sqlx.DB, *broker.Broker, string) {
	t.Helper()
	db, _ := postgrestest.NewDatabase(t, outbox.Schema(), businessTable)
	topic := postgrestest.UniqueName("orders")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return db, b, topic
}

func paid(t testing.TB, topic, orderID string, version int64) outbox.Message {
	t.Helper()
	amount, _ := event.ParseMoney("80.00")
	env, err := event.New(event.OrderPaid, event.Meta{AggregateID: orderID, AggregateVersion: version, Producer: "test"},
		event.OrderPaidData{PaymentID: "P-1", PaidAmount: amount, Currency: "CNY", CustomerID: "C-1",
			Items: []event.Item{{SKU: "SKU-1", Quantity: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := outbox.FromEnvelope(topic, env)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func newRelay(t testing.TB, db *sqlx.DB, b *broker.Broker) *outbox.Relay {
	t.Helper()
	return newRelayWith(t, db, b, outbox.DefaultRelayConfig().BatchSize)
}

func newRelayWith(t testing.TB, db *sqlx.DB, b *broker.Broker, batch int) *outbox.Relay {
	t.Helper()
	pub, err := messaging.NewPublisher(b.Addrs(), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	cfg := outbox.DefaultRelayConfig()
	cfg.BatchSize = batch
	cfg.BackoffInitial, cfg.BackoffMax = 10*time.Millisecond, 20*time.Millisecond
	r, err := outbox.NewRelay(db, outbox.NewPublisherSink(pub), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func consumeAll(t *testing.T, b *broker.Broker, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records, want %d", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestRolledBackTransactionLeavesNoRow(t *testing.T) {
	db, _, topic := setup(t)
	boom := errors.New("business rule failed after the outbox insert")
	err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		if _, err := tx.Exec(`INSERT INTO orders_t (order_id, status) VALUES ('O-1', 'PAID')`); err != nil {
			return err
		}
		if err := outbox.Add(context.Background(), tx, paid(t, topic, "O-1", 3)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx = %v", err)
	}
	var rows, orders int
	if err := db.Get(&rows, `SELECT count(*) FROM outbox_events`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&orders, `SELECT count(*) FROM orders_t`); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || orders != 0 {
		t.Fatalf("after rollback: %d outbox rows, %d orders; want 0, 0", rows, orders)
	}
}

func TestRelayPublishesInOrderWithHeaders(t *testing.T) {
	db, b, topic := setup(t)
	var msgs []outbox.Message
	for v := int64(1); v <= 5; v++ {
		msgs = append(msgs, paid(t, topic, "O-7", v))
	}
	if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, msgs...)
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := newRelay(t, db, b).RunOnce(context.Background()); err != nil || n != 5 {
		t.Fatalf("RunOnce = %d, %v", n, err)
	}
	recs := consumeAll(t, b, topic, 5)
	for i, r := range recs {
		env, err := event.Parse(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if env.EventID != msgs[i].EventID || string(r.Key) != "O-7" {
			t.Errorf("record %d: event %s key %s, want %s key O-7", i, env.EventID, r.Key, msgs[i].EventID)
		}
		headers := map[string]string{}
		for _, h := range r.Headers {
			headers[h.Key] = string(h.Value)
		}
		for _, k := range []string{"eventId", "eventType", "eventVersion", "traceparent"} {
			if headers[k] == "" {
				t.Errorf("record %d lacks header %s", i, k)
			}
		}
	}
	st, err := outbox.Lookup(context.Background(), db, msgs[4].EventID)
	if err != nil || st.Status != outbox.StatusSent {
		t.Fatalf("row status %+v, %v", st, err)
	}
}

func TestBrokerFailureKeepsRowsPendingThenDelivers(t *testing.T) {
	db, b, topic := setup(t)
	msg := paid(t, topic, "O-2", 3)
	if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, msg)
	}); err != nil {
		t.Fatal(err)
	}
	relay := newRelay(t, db, b)
	fault := b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.BrokerNotAvailable, Count: -1})
	ctx := context.Background()
	for attempt := 1; attempt <= 2; attempt++ {
		poll.Until(t, 5*time.Second, "backoff elapsed", func() bool {
			st, err := outbox.Lookup(ctx, db, msg.EventID)
			return err == nil && !st.NextAttemptAt.After(time.Now())
		})
		if _, err := relay.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := outbox.Lookup(ctx, db, msg.EventID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != outbox.StatusPending || st.Attempts != attempt || st.LastError == nil {
			t.Fatalf("after failed attempt %d: %+v", attempt, st)
		}
	}
	fault.Remove()
	poll.Until(t, 10*time.Second, "row SENT after the broker returned", func() bool {
		if _, err := relay.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := outbox.Lookup(ctx, db, msg.EventID)
		return err == nil && st.Status == outbox.StatusSent
	})
	recs := consumeAll(t, b, topic, 1)
	if len(recs) != 1 {
		t.Fatalf("delivered %d records, want 1", len(recs))
	}
}

// ForAggregate lists one aggregate's rows in sending order, with what the
// relay did to each, and nobody else's.
func TestForAggregate(t *testing.T) {
	db, _, topic := setup(t)
	ctx := context.Background()
	msgs := []outbox.Message{paid(t, topic, "O-1", 3), paid(t, topic, "O-2", 3), paid(t, topic, "O-1", 4)}
	// Each row keeps the trace of its traceparent header, which the
	// console follows from the row to the spans of its journey.
	traceOf := map[string]string{}
	for _, m := range msgs {
		traceOf[m.EventID] = strings.Split(m.Headers[event.HeaderTraceparent], "-")[1]
	}
	err := postgres.InTx(ctx, db, func(tx *sqlx.Tx) error {
		return outbox.Add(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The sink refuses everything: the rows stay PENDING with one attempt.
	relay, err := outbox.NewRelay(db, refusingSink{}, outbox.DefaultRelayConfig(), slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		aggregate string
		want      int
	}{{"O-1", 2}, {"O-2", 1}, {"O-3", 0}}
	for _, tt := range tests {
		rows, err := outbox.ForAggregate(ctx, db, tt.aggregate)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != tt.want {
			t.Fatalf("%s: %d rows, want %d", tt.aggregate, len(rows), tt.want)
		}
		for _, r := range rows {
			if r.EventType != "OrderPaid" || r.Status != outbox.StatusPending || r.Attempts != 1 || r.NextAttemptAt.IsZero() {
				t.Errorf("%s: row %+v, want a PENDING OrderPaid after 1 failed attempt", tt.aggregate, r)
			}
			if len(r.TraceID) != 32 || r.TraceID != traceOf[r.EventID] {
				t.Errorf("%s: row %s in trace %q, want its traceparent's %q", tt.aggregate, r.EventID, r.TraceID, traceOf[r.EventID])
			}
			if st, err := outbox.Lookup(ctx, db, r.EventID); err != nil || st.TraceID != r.TraceID {
				t.Errorf("Lookup(%s): trace %q, %v; want %q", r.EventID, st.TraceID, err, r.TraceID)
			}
		}
	}
}

// refusingSink delivers nothing, as a sink whose broker is down.
type refusingSink struct{}

func (refusingSink) Send(context.Context, []outbox.Message) (int, error) {
	return 0, errors.New("broker unreachable")
}
