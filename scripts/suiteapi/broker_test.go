package suiteapi_test

import (
	"context"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// newBroker starts an embedded broker with the order-events and the
// dead-letter topics in three partitions each and a client of it, both
// closed when the test ends.
func newBroker(t *testing.T) (*kfake.Cluster, *suiteapi.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, suiteapi.DefaultTopic, suiteapi.DefaultDLQTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	c := suiteapi.New(suiteapi.Config{Brokers: cluster.ListenAddrs()})
	t.Cleanup(c.Close)
	return cluster, c
}

// The topic's partitions and their end offsets are read from the broker:
// a record produced moves the end of its partition only.
func TestPartitionsAndEndOffsets(t *testing.T) {
	cluster, c := newBroker(t)
	ctx := context.Background()
	if n, err := c.Partitions(ctx); err != nil || n != 3 {
		t.Fatalf("partitions %d, %v; want 3", n, err)
	}
	if _, err := c.Produce(ctx, &kgo.Record{Topic: suiteapi.DefaultTopic, Partition: 0, Value: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	ends, err := c.EndOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, o := range ends {
		total += o
	}
	if len(ends) != 3 || total != 1 {
		t.Errorf("end offsets %v, want 3 partitions and one record", ends)
	}
	other := suiteapi.New(suiteapi.Config{Brokers: cluster.ListenAddrs(), Topic: "no-such-topic"})
	defer other.Close()
	if _, err := other.EndOffsets(ctx); err == nil {
		t.Error("the end offsets of a topic that does not exist were read")
	}
}

// CountSince counts an event's records from a mark, or from the start, up
// to the ends of the partitions when it is called.
func TestCountSince(t *testing.T) {
	_, c := newBroker(t)
	ctx := context.Background()
	produce := func(p int32, eventID string) {
		t.Helper()
		if _, err := c.Produce(ctx, &kgo.Record{Topic: suiteapi.DefaultTopic, Partition: p, Value: []byte(`{"eventId":"` + eventID + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	produce(0, "E-1")
	produce(1, "E-2")
	mark, err := c.EndOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	produce(0, "E-1")
	produce(2, "E-1")
	produce(2, "E-2")
	for _, tt := range []struct {
		name  string
		since map[int32]int64
		id    string
		want  int
	}{
		{"from the start", nil, "E-1", 3},
		{"since the mark", mark, "E-1", 2},
		{"another event since the mark", mark, "E-2", 1},
		{"an event never written", nil, "E-3", 0},
	} {
		if n, err := c.CountSince(ctx, tt.since, tt.id); err != nil || n != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.name, n, err, tt.want)
		}
	}
	end, err := c.EndOffsets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.CountSince(ctx, end, "E-1"); err != nil || n != 0 {
		t.Errorf("since the end: %d, %v; want 0 without waiting", n, err)
	}
}

// DeadLetterHeaders finds an event's dead letters on the dead-letter topic
// by their eventId header, whatever their value, one per consumer that
// wrote one, and nothing of the order-events topic.
func TestDeadLetterHeaders(t *testing.T) {
	_, c := newBroker(t)
	ctx := context.Background()
	deadLetter := func(p int32, eventID, consumerName, value string) {
		t.Helper()
		if _, err := c.Produce(ctx, &kgo.Record{Topic: suiteapi.DefaultDLQTopic, Partition: p, Value: []byte(value), Headers: []kgo.RecordHeader{
			{Key: consumer.MetaEventID, Value: []byte(eventID)},
			{Key: consumer.MetaConsumer, Value: []byte(consumerName)},
			{Key: consumer.MetaErrorClass, Value: []byte("PERMANENT")},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	deadLetter(0, "E-1", "inventory", "not JSON")
	deadLetter(1, "E-2", "inventory", `{"eventId":"E-1"}`)
	deadLetter(2, "E-1", "points", `{}`)
	if _, err := c.Produce(ctx, &kgo.Record{Topic: suiteapi.DefaultTopic, Partition: 0, Value: []byte(`{"eventId":"E-1"}`),
		Headers: []kgo.RecordHeader{{Key: consumer.MetaEventID, Value: []byte("E-1")}}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id   string
		want []string
	}{
		{"E-1", []string{"inventory", "points"}},
		{"E-2", []string{"inventory"}},
		{"E-3", nil},
	} {
		headers, err := c.DeadLetterHeaders(ctx, tt.id)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range headers {
			if h[consumer.MetaErrorClass] != "PERMANENT" {
				t.Errorf("%s: headers %v, want its errorClass", tt.id, h)
			}
			got = append(got, h[consumer.MetaConsumer])
		}
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: dead letters of %v, want %v", tt.id, got, tt.want)
		}
	}
}
