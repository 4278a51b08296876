package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/versionguard"
)

// ledger is a consumer's side effects: how often each event was applied.
type ledger struct {
	mu      sync.Mutex
	applied map[string]int
}

func (l *ledger) apply(_ context.Context, _ *versionguard.UnitOfWork, env event.Envelope, _ string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied[env.EventID]++
	if env.EventType == event.OrderPaid {
		return "PAID", nil
	}
	return "REFUNDED", nil
}

func (l *ledger) count(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.applied[id]
}

// failingPublisher refuses every message, as a broker that is down does.
type failingPublisher struct{}

func (failingPublisher) Publish(string, ...*message.Message) error { return errors.New("broker down") }
func (failingPublisher) Close() error                              { return nil }

func orderRefunded(t *testing.T, orderID string) event.Envelope {
	t.Helper()
	amount, _ := event.ParseMoney("10.00")
	env, err := event.New(event.OrderRefunded, event.Meta{AggregateID: orderID, AggregateVersion: 5, Producer: "test"},
		event.OrderRefundedData{RefundID: "R", PaymentID: "P", RefundedAmount: amount, TotalRefundedAmount: amount,
			Currency: "CNY", CustomerID: "C", Items: []event.Item{{SKU: "S", Quantity: 1}}, TotalReturnedItems: []event.Item{{SKU: "S", Quantity: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// recordsWithKey returns the records of topic with key up to a sentinel it appends
// under the same key: every record with that key is on the sentinel's
// partition before it, so the count is exact without waiting for nothing.
func recordsWithKey(t *testing.T, brokers []string, topic, key string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out []*kgo.Record
	for ctx.Err() == nil {
		for _, r := range cl.PollFetches(ctx).Records() {
			if string(r.Key) != key {
				continue
			}
			if string(r.Value) == "sentinel" {
				return out
			}
			out = append(out, r)
		}
	}
	t.Fatalf("sentinel of %s not read back from %s", key, topic)
	return nil
}

func headerMap(r *kgo.Record) map[string]string {
	out := map[string]string{}
	for _, h := range r.Headers {
		out[h.Key] = string(h.Value)
	}
	return out
}

// A gap that never fills is dead-lettered after the deadline, exactly
// once, and counted; a gap that fills in time is applied and not
// dead-lettered; while the DLQ cannot be published the event stays parked.
func TestGapSweeperDeadLettersExpiredParkedEvents(t *testing.T) {
	ctx := context.Background()
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema(), dlq.Schema())
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 4, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub, err := messaging.NewPublisher(b.Addrs(), watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	const group = "gap-test"
	effects := &ledger{applied: map[string]int{}}
	guard := versionguard.New(group, versionguard.Transitions{
		event.OrderPaid:     {versionguard.InitialState},
		event.OrderRefunded: {"PAID"},
	}, effects.apply)
	handle := func(env event.Envelope) versionguard.Outcome {
		t.Helper()
		var out versionguard.Outcome
		if err := versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
			out, err = guard.Handle(ctx, uow, env)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	lostRefund := orderRefunded(t, "O-LOST") // its OrderPaid never comes
	lateRefund, latePaid := orderRefunded(t, "O-LATE"), orderPaid(t, "O-LATE")
	for _, env := range []event.Envelope{lostRefund, lateRefund} {
		if got := handle(env); got != versionguard.WaitingForGap {
			t.Fatalf("%s: %s, want %s", env.AggregateID, got, versionguard.WaitingForGap)
		}
	}
	if got := handle(latePaid); got != versionguard.Applied {
		t.Fatalf("late OrderPaid: %s", got)
	}

	const deadline = 300 * time.Millisecond
	cfg := consumer.Config{Consumer: group, Topic: topic, DLQTopic: dlqTopic, Retry: consumer.DefaultRetryConfig()}
	parking := consumer.ParkingConfig{Deadline: deadline, SweepInterval: 10 * time.Millisecond}
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	metrics := consumer.NewMetrics(reg)
	store := dlq.NewStore(db)

	// The broker refuses the DLQ message: nothing is recorded and the
	// event stays parked for the next sweep.
	down, err := consumer.NewGapSweeper(cfg, parking, db, guard, failingPublisher{}, metrics, logger)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "a sweep that reaches the expired event", func() bool {
		_, err := down.Sweep(ctx)
		return err != nil
	})
	if recs, err := store.List(ctx, ""); err != nil || len(recs) != 0 {
		t.Fatalf("%d dead letters (%v) after a failed publish, want 0", len(recs), err)
	}
	if n, err := guard.CountParked(ctx, db); err != nil || n != 1 {
		t.Fatalf("%d parked (%v) after a failed publish, want O-LOST's refund still parked", n, err)
	}

	sweeper, err := consumer.NewGapSweeper(cfg, parking, db, guard, pub, metrics, logger)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sweeper.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want the one expired event", n, err)
	}
	if n, err := sweeper.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v; want nothing left", n, err)
	}

	recs, err := store.List(ctx, "")
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d dead letters (%v), want 1", len(recs), err)
	}
	r := recs[0]
	if r.Consumer != group || r.EventID != lostRefund.EventID || r.AggregateID != "O-LOST" ||
		r.EventType != string(event.OrderRefunded) || r.ErrorClass != string(consumer.Permanent) || r.Attempts != 1 ||
		r.OriginalTopic != topic || string(r.Key) != "O-LOST" || r.FirstFailedAt.IsZero() {
		t.Errorf("dead letter %+v", r)
	}
	if !strings.HasPrefix(r.FailureReason, "WAITING_FOR_GAP: ") || !strings.Contains(r.FailureReason, "1..4") ||
		!strings.Contains(r.FailureReason, "PAID") {
		t.Errorf("failureReason %q, want WAITING_FOR_GAP and the missing predecessor (a version in 1..4 leading to PAID)", r.FailureReason)
	}
	if replayed, err := event.Parse(r.Value); err != nil || replayed.EventID != lostRefund.EventID {
		t.Errorf("dead letter value does not parse back to the event (%v)", err)
	}

	dead := recordsWithKey(t, b.Addrs(), dlqTopic, "O-LOST")
	if len(dead) != 1 {
		t.Fatalf("%d DLQ topic messages for O-LOST, want 1", len(dead))
	}
	h := headerMap(dead[0])
	for k, want := range map[string]string{
		"originalTopic": topic, "eventId": lostRefund.EventID, "errorClass": "PERMANENT", "attempts": "1",
		"consumer": group, "failureReason": r.FailureReason,
	} {
		if h[k] != want {
			t.Errorf("DLQ header %s = %q, want %q", k, h[k], want)
		}
	}
	if h["firstFailedAt"] == "" {
		t.Error("DLQ message lacks firstFailedAt")
	}
	if late := recordsWithKey(t, b.Addrs(), dlqTopic, "O-LATE"); len(late) != 0 {
		t.Errorf("%d DLQ messages for O-LATE, whose gap filled in time", len(late))
	}

	if n, err := guard.CountParked(ctx, db); err != nil || n != 0 {
		t.Errorf("%d parked (%v), want 0", n, err)
	}
	if n := effects.count(lateRefund.EventID); n != 1 {
		t.Errorf("O-LATE's refund applied %d times, want once (its predecessor came in time)", n)
	}
	if n := effects.count(lostRefund.EventID); n != 0 {
		t.Errorf("O-LOST's refund applied %d times, want 0", n)
	}
	for name, want := range map[string]float64{
		"consumer_gap_timeouts_total": 1, "consumer_dead_letters_total": 1, "consumer_parked_events": 0,
	} {
		if got := gatherSum(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// Run runs the sweeper of a runtime with Parked set, next to the
// router, and stops both with its context.
func TestRunConsumerSweepsParkedEvents(t *testing.T) {
	ctx := context.Background()
	db, _ := postgrestest.NewDatabase(t, versionguard.Schema(), dlq.Schema())
	topic, dlqTopic := postgrestest.UniqueName("events"), postgrestest.UniqueName("dlq")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: 2, Topics: []string{topic, dlqTopic}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub := messaging.NewLazyPublisher(b.Addrs(), watermill.NopLogger{})
	defer pub.Close()

	guard := versionguard.New("runner-gap", versionguard.Transitions{event.OrderRefunded: {"PAID"}},
		(&ledger{applied: map[string]int{}}).apply)
	if err := versionguard.InUnitOfWork(ctx, db, func(uow *versionguard.UnitOfWork) error {
		_, err := guard.Handle(ctx, uow, orderRefunded(t, "O-GAP"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	store := dlq.NewStore(db)
	rt := consumer.Runtime{
		Brokers: b.Addrs(),
		Group:   "runner-gap",
		Config:  consumer.Config{Consumer: "runner-gap", Topic: topic, DLQTopic: dlqTopic, Retry: consumer.DefaultRetryConfig()},
		DLQ:     pub, Recorder: store, Metrics: consumer.NewMetrics(reg), Logger: slog.New(slog.DiscardHandler),
		Handle: (&seen{events: map[string]int{}}).handle,
		Parked: guard, DB: db,
		Parking: consumer.ParkingConfig{Deadline: 100 * time.Millisecond, SweepInterval: 20 * time.Millisecond},
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- consumer.Run(runCtx, rt) }()

	poll.Until(t, 20*time.Second, "the parked event dead-lettered", func() bool {
		n, _ := store.Count(ctx, "O-GAP")
		return n == 1
	})
	if got := gatherSum(t, reg, "consumer_gap_timeouts_total"); got != 1 {
		t.Errorf("consumer_gap_timeouts_total = %v, want 1", got)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after its context ended", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// gatherSum sums every sample of a counter or gauge family in reg.
func gatherSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
