package messaging_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/messaging"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
)

// windowFixture is a broker with one topic of the given partitions and a
// producer for it.
type windowFixture struct {
	brokers []string
	topic   string
	client  *kgo.Client
}

func newWindowFixture(tb testing.TB, partitions int32) *windowFixture {
	tb.Helper()
	topic := "window"
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: partitions, Topics: []string{topic}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.Close)
	client, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.Close)
	return &windowFixture{brokers: b.Addrs(), topic: topic, client: client}
}

// publish appends one record per key to partition p, in order, each
// naming its key and its place in the partition.
func (f *windowFixture) publish(tb testing.TB, p int32, keys ...string) {
	tb.Helper()
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: f.topic, Partition: p, Key: []byte(k), Value: fmt.Appendf(nil, "%s/%d", k, i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
}

// subscribe joins group with a window per partition of window messages,
// a partition borrowing beyond it while fewer than maxInFlight are in
// flight in all (0: window).
func (f *windowFixture) subscribe(tb testing.TB, group string, window, maxInFlight int) <-chan *message.Message {
	tb.Helper()
	cfg := messaging.DefaultSubscriberConfig(f.brokers, group)
	cfg.Window, cfg.MaxInFlight = window, max(window, maxInFlight)
	_, msgs := f.subscribeWith(tb, cfg)
	return msgs
}

// subscribeWith subscribes to the fixture's topic with cfg until the test
// ends; closing the subscriber earlier is the test's.
func (f *windowFixture) subscribeWith(tb testing.TB, cfg messaging.SubscriberConfig) (*messaging.Subscriber, <-chan *message.Message) {
	tb.Helper()
	sub, err := messaging.NewSubscriber(cfg, watermill.NopLogger{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sub.Close() })
	msgs, err := sub.Subscribe(context.Background(), f.topic)
	if err != nil {
		tb.Fatal(err)
	}
	return sub, msgs
}

// distinctKeys are n keys of partition p, no two alike.
func distinctKeys(p int32, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("p%d-k%d", p, i)
	}
	return keys
}

// committed returns the group's committed offset of partition p, -1 if
// none.
func (f *windowFixture) committed(tb testing.TB, group string, p int32) int64 {
	tb.Helper()
	offsets, err := kadm.NewClient(f.client).FetchOffsets(context.Background(), group)
	if err != nil {
		tb.Fatal(err)
	}
	o, ok := offsets.Lookup(f.topic, p)
	if !ok {
		return -1
	}
	return o.At
}

// receive takes n messages from msgs without acknowledging them.
func receive(tb testing.TB, msgs <-chan *message.Message, n int) []*message.Message {
	tb.Helper()
	var got []*message.Message
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case m := <-msgs:
			got = append(got, m)
		case <-timeout:
			tb.Fatalf("received %d of %d messages", len(got), n)
		}
	}
	return got
}

// nothingMore fails when msgs delivers a message before the broker could
// have delivered every record it holds: the fixture's partition is read
// again up to its end by a second group first, so a message held back is
// held back by the window, not by a slow fetch.
func (f *windowFixture) nothingMore(t *testing.T, msgs <-chan *message.Message, records int) {
	t.Helper()
	probe := f.subscribe(t, fmt.Sprintf("probe-%d", time.Now().UnixNano()), 1, 0)
	for range records {
		receive(t, probe, 1)[0].Ack()
	}
	select {
	case m := <-msgs:
		t.Fatalf("message %s delivered past the window", m.Payload)
	default:
	}
}

func payloads(msgs []*message.Message) []string {
	var s []string
	for _, m := range msgs {
		s = append(s, string(m.Payload))
	}
	slices.Sort(s)
	return s
}

// The window delivers up to Window messages of one partition at once (more,
// up to MaxInFlight, when it is the only partition with messages waiting),
// but never two with one key: a key's next message waits for its last
// one's acknowledgement, and a later key may pass it.
func TestSubscriberWindowHoldsBackOnlyBusyKeys(t *testing.T) {
	tests := []struct {
		name                string
		window, maxInFlight int
		keys                []string
		// first is what is in flight before any acknowledgement; then the
		// first message of first is acknowledged and next arrives.
		first []string
		next  []string
	}{
		{"one per partition", 1, 0, []string{"a", "b", "c"}, []string{"a/0"}, []string{"b/1"}},
		{"window full", 2, 0, []string{"a", "b", "c"}, []string{"a/0", "b/1"}, []string{"c/2"}},
		{"busy key skipped", 3, 0, []string{"a", "a", "b", "c"}, []string{"a/0", "b/2", "c/3"}, []string{"a/1"}},
		{"busy key waits even with room", 4, 0, []string{"a", "a", "a"}, []string{"a/0"}, []string{"a/1"}},
		{"a key's next goes before younger keys once its last is acknowledged", 2, 0, []string{"a", "b", "a", "c"}, []string{"a/0", "b/1"}, []string{"a/2"}},
		{"the only partition waiting takes the max in flight", 1, 3, []string{"a", "b", "c", "d"}, []string{"a/0", "b/1", "c/2"}, []string{"d/3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newWindowFixture(t, 1)
			f.publish(t, 0, tt.keys...)
			msgs := f.subscribe(t, "g", tt.window, tt.maxInFlight)
			first := receive(t, msgs, len(tt.first))
			if got := payloads(first); !slices.Equal(got, tt.first) {
				t.Fatalf("in flight %v, want %v", got, tt.first)
			}
			f.nothingMore(t, msgs, len(tt.keys))
			i := slices.IndexFunc(first, func(m *message.Message) bool { return string(m.Payload) == tt.first[0] })
			first[i].Ack()
			if got := payloads(receive(t, msgs, len(tt.next))); !slices.Equal(got, tt.next) {
				t.Errorf("after acknowledging %s: %v, want %v", tt.first[0], got, tt.next)
			}
		})
	}
}

// Messages in flight stay bounded across partitions: each partition has
// its window, and one may borrow beyond it only while the subscription has
// fewer than MaxInFlight.
func TestSubscriberBoundsMessagesInFlight(t *testing.T) {
	const partitions, perPartition = 4, 6
	f := newWindowFixture(t, partitions)
	for p := range int32(partitions) {
		f.publish(t, p, distinctKeys(p, perPartition)...)
	}
	msgs := f.subscribe(t, "g", 1, 2)
	// The first partition read takes its window and borrows one more up to
	// MaxInFlight; every other partition its window.
	const want = 2 + (partitions-1)*1
	receive(t, msgs, want)
	f.nothingMore(t, msgs, partitions*perPartition)
}

// A partition's offset is committed up to its first message not yet
// acknowledged, so a new member of the group starts there: the messages
// acknowledged after it are delivered again, none is skipped.
func TestSubscriberCommitsUpToTheFirstUnacknowledged(t *testing.T) {
	f := newWindowFixture(t, 1)
	f.publish(t, 0, "a", "b", "c", "d")
	cfg := messaging.DefaultSubscriberConfig(f.brokers, "g")
	cfg.Window, cfg.MaxInFlight = 4, 4
	sub, msgs := f.subscribeWith(t, cfg)
	byPayload := map[string]*message.Message{}
	for _, m := range receive(t, msgs, 4) {
		byPayload[string(m.Payload)] = m
	}
	for _, p := range []string{"a/0", "c/2", "d/3"} {
		byPayload[p].Ack()
	}
	poll.Until(t, 10*time.Second, "offset 1 committed", func() bool { return f.committed(t, "g", 0) == 1 })
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.committed(t, "g", 0); got != 1 {
		t.Fatalf("committed offset after close %d, want 1 (b/1 was never acknowledged)", got)
	}

	again := f.subscribe(t, "g", 4, 0)
	got := receive(t, again, 3)
	if p := payloads(got); !slices.Equal(p, []string{"b/1", "c/2", "d/3"}) {
		t.Fatalf("a new member received %v, want b/1 and the two acknowledged after it", p)
	}
	for _, m := range got {
		m.Ack()
	}
	poll.Until(t, 10*time.Second, "offset 4 committed", func() bool { return f.committed(t, "g", 0) == 4 })
}

// A nacked message is delivered again, and its key's next message waits
// until it is acknowledged.
func TestSubscriberRedeliversANackedMessageBeforeItsKeysNext(t *testing.T) {
	f := newWindowFixture(t, 1)
	f.publish(t, 0, "a", "a", "b")
	msgs := f.subscribe(t, "g", 4, 0)
	first := receive(t, msgs, 2)
	if p := payloads(first); !slices.Equal(p, []string{"a/0", "b/2"}) {
		t.Fatalf("in flight %v, want a/0 and b/2", p)
	}
	for _, m := range first {
		if string(m.Payload) == "a/0" {
			m.Nack()
		} else {
			m.Ack()
		}
	}
	again := receive(t, msgs, 1)[0]
	if string(again.Payload) != "a/0" {
		t.Fatalf("after a nack: %s, want a/0 again", again.Payload)
	}
	again.Ack()
	if next := receive(t, msgs, 1)[0]; string(next.Payload) != "a/1" {
		t.Fatalf("after the redelivered a/0 was acknowledged: %s, want a/1", next.Payload)
	}
}

// Every message of many keys over many partitions arrives once, each key's
// in publish order, never two of one key at once, and more than one per
// partition in flight together.
func TestSubscriberKeepsPerKeyOrderAcrossPartitions(t *testing.T) {
	const partitions, keysPerPartition, perKey = 4, 8, 5
	f := newWindowFixture(t, partitions)
	for p := range int32(partitions) {
		var ks []string
		for range perKey {
			ks = append(ks, distinctKeys(p, keysPerPartition)...)
		}
		f.publish(t, p, ks...)
	}
	msgs := f.subscribe(t, "g", 8, 0)
	inFlight := map[string]bool{}
	seen := map[string][]int{}
	keyOf := func(m *message.Message) string {
		key, _, _ := strings.Cut(string(m.Payload), "/")
		return key
	}
	take := func(m *message.Message) {
		key, place, _ := strings.Cut(string(m.Payload), "/")
		i, err := strconv.Atoi(place)
		if err != nil {
			t.Fatalf("payload %q: %v", m.Payload, err)
		}
		if inFlight[key] {
			t.Errorf("two messages of key %s in flight at once", key)
		}
		inFlight[key] = true
		seen[key] = append(seen[key], i)
	}
	ack := func(m *message.Message) {
		inFlight[keyOf(m)] = false
		m.Ack()
	}

	// More messages than partitions in flight before any is acknowledged:
	// each partition's first keysPerPartition messages are distinct orders,
	// all inside its window.
	held := receive(t, msgs, partitions+1)
	for _, m := range held {
		take(m)
	}
	for _, m := range held {
		ack(m)
	}
	for range partitions*keysPerPartition*perKey - len(held) {
		m := receive(t, msgs, 1)[0]
		take(m)
		ack(m)
	}
	if len(seen) != partitions*keysPerPartition {
		t.Errorf("%d keys seen, want %d", len(seen), partitions*keysPerPartition)
	}
	for k, got := range seen {
		if len(got) != perKey || !slices.IsSorted(got) {
			t.Errorf("key %s: places %v, want %d messages in publish order", k, got, perKey)
		}
	}
}

// A subscription holding MaxBuffered records fetches more only as they are
// acknowledged, and so drains a backlog far larger than its buffer, every
// record once.
func TestSubscriberDrainsPastItsBuffer(t *testing.T) {
	const records = 500
	f := newWindowFixture(t, 2)
	for p := range int32(2) {
		f.publish(t, p, distinctKeys(p, records/2)...)
	}
	cfg := messaging.DefaultSubscriberConfig(f.brokers, "g")
	cfg.Window, cfg.MaxInFlight, cfg.MaxBuffered = 4, 8, 16
	_, msgs := f.subscribeWith(t, cfg)
	seen := map[string]int{}
	for range records {
		m := receive(t, msgs, 1)[0]
		seen[string(m.Payload)]++
		m.Ack()
	}
	if len(seen) != records {
		t.Errorf("%d distinct records of %d", len(seen), records)
	}
	for p, n := range seen {
		if n != 1 {
			t.Errorf("%s delivered %d times", p, n)
		}
	}
}

// BenchmarkSubscriberDrain drains a backlog of b.N records over 64
// partitions through a Watermill router with a no-op handler: the
// subscriber's delivery limit.
func BenchmarkSubscriberDrain(b *testing.B) {
	for _, window := range []int{1, 8} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			f := newWindowFixture(b, messaging.Partitions)
			recs := make([]*kgo.Record, b.N)
			value := make([]byte, 600)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: f.topic, Partition: int32(i % messaging.Partitions), Key: fmt.Appendf(nil, "O-%d", i), Value: value}
			}
			if err := f.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			cfg := messaging.DefaultSubscriberConfig(f.brokers, "drain")
			cfg.Window, cfg.MaxInFlight = window, messaging.Partitions*window
			sub, err := messaging.NewSubscriber(cfg, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			var handled atomic.Int64
			done := make(chan struct{})
			router.AddConsumerHandler("drain", f.topic, sub, func(*message.Message) error {
				if handled.Add(1) == int64(b.N) {
					close(done)
				}
				return nil
			})
			ctx, cancel := context.WithCancel(context.Background())
			b.ResetTimer()
			var g errgroup.Group
			g.Go(func() error { return router.Run(ctx) })
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Errorf("handled %d of %d", handled.Load(), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			cancel()
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// A record the subscriber's Skip declines is never delivered and counts as
// acknowledged: at the head of its partition its offset is committed at
// once; behind a record not yet acknowledged it waits for that one, so a
// crash still redelivers everything after the first unacknowledged record.
func TestSubscriberSkipsWhatSkipDeclines(t *testing.T) {
	type record struct{ key, kind string }
	tests := []struct {
		name    string
		records []record
		// deliver is what the subscriber hands over, by payload.
		deliver []string
		// ack are the deliveries acknowledged before the subscriber closes.
		ack []string
		// committed is the group's offset after the close, -1 for none.
		committed int64
		// again is what a new member receives then.
		again []string
	}{
		{
			name:      "skipped at the head: committed without a delivery",
			records:   []record{{"a", "skip"}, {"b", "skip"}},
			committed: 2,
		},
		{
			name:      "skipped behind an unacknowledged record: not committed past it",
			records:   []record{{"a", "keep"}, {"b", "skip"}, {"c", "keep"}, {"d", "skip"}},
			deliver:   []string{"a/0", "c/2"},
			ack:       []string{"c/2"},
			committed: -1,
			again:     []string{"a/0", "c/2"},
		},
		{
			name:      "skipped between acknowledged records: committed with them",
			records:   []record{{"a", "keep"}, {"b", "skip"}, {"c", "keep"}, {"d", "skip"}},
			deliver:   []string{"a/0", "c/2"},
			ack:       []string{"a/0", "c/2"},
			committed: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newWindowFixture(t, 1)
			recs := make([]*kgo.Record, len(tt.records))
			for i, r := range tt.records {
				recs[i] = &kgo.Record{Topic: f.topic, Partition: 0, Key: []byte(r.key), Value: fmt.Appendf(nil, "%s/%d", r.key, i),
					Headers: []kgo.RecordHeader{{Key: "kind", Value: []byte(r.kind)}}}
			}
			if err := f.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg := messaging.DefaultSubscriberConfig(f.brokers, "g")
			cfg.Skip = func(h messaging.RecordHeaders) bool { return h.Get("kind") == "skip" }
			sub, msgs := f.subscribeWith(t, cfg)
			got := receive(t, msgs, len(tt.deliver))
			if p := payloads(got); !slices.Equal(p, tt.deliver) {
				t.Fatalf("delivered %v, want %v", p, tt.deliver)
			}
			f.nothingMore(t, msgs, len(tt.records))
			for _, m := range got {
				if slices.Contains(tt.ack, string(m.Payload)) {
					m.Ack()
				}
			}
			if tt.committed >= 0 {
				poll.Until(t, 10*time.Second, fmt.Sprintf("offset %d committed", tt.committed),
					func() bool { return f.committed(t, "g", 0) == tt.committed })
			}
			if err := sub.Close(); err != nil {
				t.Fatal(err)
			}
			if got := f.committed(t, "g", 0); got != tt.committed {
				t.Fatalf("committed offset after close %d, want %d", got, tt.committed)
			}
			if len(tt.again) == 0 {
				return
			}
			_, again := f.subscribeWith(t, cfg)
			if p := payloads(receive(t, again, len(tt.again))); !slices.Equal(p, tt.again) {
				t.Fatalf("a new member received %v, want %v", p, tt.again)
			}
		})
	}
}
