package lag_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/lag"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

const (
	partitions = 4
	records    = 50
	timeout    = 30 * time.Second
)

// cluster is an embedded broker with one fresh topic of four partitions.
type cluster struct {
	brokers []string
	topic   string
	// base is the timestamp of record 0; record i is base + i seconds.
	base time.Time
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	topic := postgrestest.UniqueName("lag")
	b, err := broker.Start(broker.Config{Addr: "127.0.0.1:0", Partitions: partitions, Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return &cluster{brokers: b.Addrs(), topic: topic, base: time.Now().Add(-time.Hour).Truncate(time.Millisecond)}
}

// produce writes n records, record i to partition i%4 with timestamp
// base + i s, an hour in the past: the oldest-age figures are then exact.
func (c *cluster) produce(t *testing.T, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: c.topic, Partition: int32(i % partitions), Value: []byte("v"),
			Timestamp: c.recordTime(i)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

func (c *cluster) recordTime(i int) time.Time { return c.base.Add(time.Duration(i) * time.Second) }

// member joins group and reads every record of the topic, committing
// nothing by itself.
type member struct {
	cl   *kgo.Client
	recs []*kgo.Record
}

func join(t *testing.T, c *cluster, group string, n int) *member {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(c.topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	m := &member{cl: cl}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for len(m.recs) < n && ctx.Err() == nil {
		m.recs = append(m.recs, cl.PollFetches(ctx).Records()...)
	}
	if len(m.recs) != n {
		t.Fatalf("group %s read %d records, want %d", group, len(m.recs), n)
	}
	return m
}

// commit commits, per partition, the records below the given offset.
func (m *member) commit(t *testing.T, upTo map[int32]int64) {
	t.Helper()
	var recs []*kgo.Record
	for _, r := range m.recs {
		if r.Offset < upTo[r.Partition] {
			recs = append(recs, r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := m.cl.CommitRecords(ctx, recs...); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func measure(t *testing.T, c *cluster, group string) lag.Sample {
	t.Helper()
	meter, err := lag.NewMeter(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer meter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := meter.Measure(ctx, group, c.topic)
	if err != nil {
		t.Fatalf("measure: %v", err)
	}
	return s
}

func TestMeasureLagAndOldestAgePerPartition(t *testing.T) {
	c := startCluster(t)
	c.produce(t, records) // partitions 0 and 1 hold 13 records, 2 and 3 hold 12
	group := postgrestest.UniqueName("group")
	m := join(t, c, group, records)
	// Partition 0 fully committed, partition 1 up to offset 5, 2 and 3 never.
	m.commit(t, map[int32]int64{0: 13, 1: 5})

	s := measure(t, c, group)
	want := []struct {
		committed, end, lag int64
		oldestRecord        int // index of the record at the group's position; -1 for none
	}{
		{committed: 13, end: 13, lag: 0, oldestRecord: -1},
		{committed: 5, end: 13, lag: 8, oldestRecord: 1 + 5*partitions},
		{committed: lag.NoCommit, end: 12, lag: 12, oldestRecord: 2},
		{committed: lag.NoCommit, end: 12, lag: 12, oldestRecord: 3},
	}
	if len(s.Partitions) != partitions {
		t.Fatalf("partitions = %+v, want %d", s.Partitions, partitions)
	}
	for i, w := range want {
		p := s.Partitions[i]
		if p.Partition != int32(i) || p.CommittedOffset != w.committed || p.EndOffset != w.end || p.Lag != w.lag {
			t.Errorf("partition %d = %+v, want committed %d end %d lag %d", i, p, w.committed, w.end, w.lag)
		}
		if w.oldestRecord < 0 {
			if !p.OldestTimestamp.IsZero() || p.OldestAgeSeconds != 0 {
				t.Errorf("partition %d without lag: oldest %v age %v, want none", i, p.OldestTimestamp, p.OldestAgeSeconds)
			}
			continue
		}
		wantTS := c.recordTime(w.oldestRecord)
		if !p.OldestTimestamp.Equal(wantTS) {
			t.Errorf("partition %d oldest timestamp = %v, want %v (record %d)", i, p.OldestTimestamp, wantTS, w.oldestRecord)
		}
		if age := s.SampledAt.Sub(wantTS).Seconds(); p.OldestAgeSeconds != age {
			t.Errorf("partition %d oldest age = %v s, want %v s", i, p.OldestAgeSeconds, age)
		}
	}
	if s.TotalLag != 32 {
		t.Errorf("total lag = %d, want 32", s.TotalLag)
	}
	if wantAge := s.SampledAt.Sub(c.recordTime(2)); s.OldestAge != wantAge || s.OldestAge < 59*time.Minute {
		t.Errorf("oldest age = %v, want %v (record 2, an hour old)", s.OldestAge, wantAge)
	}

	m.commit(t, map[int32]int64{0: 13, 1: 13, 2: 12, 3: 12})
	s = measure(t, c, group)
	for _, p := range s.Partitions {
		if p.Lag != 0 || p.CommittedOffset != p.EndOffset || p.OldestAgeSeconds != 0 || !p.OldestTimestamp.IsZero() {
			t.Errorf("after committing everything, partition %+v: want lag 0 and no oldest record", p)
		}
	}
	if s.TotalLag != 0 || s.OldestAge != 0 {
		t.Errorf("after committing everything: total lag %d, oldest age %v; want 0 and 0", s.TotalLag, s.OldestAge)
	}
}

func TestMeasureGroupThatNeverCommittedLagsByTheWholeTopic(t *testing.T) {
	c := startCluster(t)
	s := measure(t, c, "nobody")
	if len(s.Partitions) != partitions || s.TotalLag != 0 || s.OldestAge != 0 {
		t.Fatalf("empty topic: %+v, want 4 partitions without lag", s)
	}
	c.produce(t, 10)
	s = measure(t, c, "nobody")
	if s.TotalLag != 10 {
		t.Errorf("total lag = %d, want 10 (a new group starts at the oldest offset)", s.TotalLag)
	}
	for _, p := range s.Partitions {
		if p.CommittedOffset != lag.NoCommit {
			t.Errorf("partition %d committed %d, want NoCommit", p.Partition, p.CommittedOffset)
		}
	}
}

func TestMeasureUnknownTopicFails(t *testing.T) {
	c := startCluster(t)
	meter, err := lag.NewMeter(c.brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer meter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := meter.Measure(ctx, "g", "no-such-topic"); err == nil {
		t.Fatal("measure of an unknown topic succeeded, want an error")
	}
}
