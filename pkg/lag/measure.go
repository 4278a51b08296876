// Package lag measures how far a consumer group is behind its topic, in the
// four figures the tutorial reads during a backlog drill: consumer lag (per
// partition and in total), the age of the oldest unprocessed message,
// throughput, and the retry and dead-letter rates.
//
// Lag alone says how many messages wait; the oldest message's age says how
// late the business is, which is what an alert should fire on. Both come
// from the broker (offsets and one record per lagging partition), so they
// are right even while the consumer is down; the rates come from the
// consumer's own counters (pkg/messaging).
package lag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NoCommit is the CommittedOffset of a partition the group has never
// committed: it will start at the log start (new groups read from the
// oldest offset), so all of the partition counts as lag.
const NoCommit int64 = -1

// Partition is the position of the group in one partition.
type Partition struct {
	Partition int32 `json:"partition"`
	// StartOffset is the log start offset: the oldest record still kept.
	StartOffset int64 `json:"startOffset"`
	// EndOffset is the high watermark: the offset the next record gets.
	EndOffset int64 `json:"endOffset"`
	// CommittedOffset is the next offset the group will read, or NoCommit.
	CommittedOffset int64 `json:"committedOffset"`
	// Lag is EndOffset minus the group's position (never below 0).
	Lag int64 `json:"lag"`
	// OldestTimestamp is the timestamp of the oldest unprocessed record (the
	// record at the group's position); zero when the partition has no lag.
	OldestTimestamp time.Time `json:"oldestTimestamp,omitzero"`
	// OldestAgeSeconds is how long that record has waited; 0 without lag.
	OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
}

// Sample is one measurement of a group on a topic.
type Sample struct {
	Group     string    `json:"group"`
	Topic     string    `json:"topic"`
	SampledAt time.Time `json:"sampledAt"`
	// Partitions are sorted by partition number.
	Partitions []Partition `json:"partitions"`
	TotalLag   int64       `json:"totalLag"`
	// OldestAge is the largest OldestAgeSeconds of the partitions.
	OldestAge time.Duration `json:"-"`
	// EndOffsets is the sum of the partitions' end offsets: its growth over
	// time is the produce rate.
	EndOffsets int64 `json:"-"`
}

// Meter measures consumer groups on one cluster. It keeps one client for
// the offset requests and opens a short-lived consumer to read the oldest
// unprocessed record of each lagging partition.
type Meter struct {
	opts  []kgo.Opt
	cl    *kgo.Client
	admin *kadm.Client
}

// NewMeter returns a meter for the cluster at brokers; opts are added to
// every client it opens (TLS, SASL, ...).
func NewMeter(brokers []string, opts ...kgo.Opt) (*Meter, error) {
	if len(brokers) == 0 {
		return nil, errors.New("lag meter: no brokers")
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("lag-meter")}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("lag meter client: %w", err)
	}
	return &Meter{opts: all, cl: cl, admin: kadm.NewClient(cl)}, nil
}

// Close releases the meter's client.
func (m *Meter) Close() { m.cl.Close() }

// Measure reads, for every partition of topic, the log start and end offsets
// and group's committed offset, and the timestamp of the record at the
// group's position in each partition that lags.
func (m *Meter) Measure(ctx context.Context, group, topic string) (Sample, error) {
	starts, err := listed(m.admin.ListStartOffsets(ctx, topic))
	if err != nil {
		return Sample{}, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := listed(m.admin.ListEndOffsets(ctx, topic))
	if err != nil {
		return Sample{}, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	committed, err := m.admin.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// A group that never joined (kfake says so; Kafka answers with no
		// offsets): it has committed nothing.
		committed, err = nil, nil
	}
	if err != nil {
		return Sample{}, fmt.Errorf("fetch committed offsets of group %s: %w", group, err)
	}

	s := Sample{Group: group, Topic: topic, SampledAt: time.Now()}
	positions := make(map[int32]int64)
	for p, end := range ends[topic] {
		part := Partition{Partition: p, EndOffset: end.Offset, CommittedOffset: NoCommit}
		if start, ok := starts.Lookup(topic, p); ok {
			part.StartOffset = start.Offset
		}
		pos := part.StartOffset
		if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
			part.CommittedOffset = c.At
			// A commit below the log start points at deleted records: the
			// group resumes at the log start.
			pos = max(c.At, part.StartOffset)
		}
		part.Lag = max(part.EndOffset-pos, 0)
		if part.Lag > 0 {
			positions[p] = pos
		}
		s.Partitions = append(s.Partitions, part)
		s.TotalLag += part.Lag
		s.EndOffsets += part.EndOffset
	}
	slices.SortFunc(s.Partitions, func(a, b Partition) int { return int(a.Partition - b.Partition) })

	oldest, err := m.recordTimes(ctx, topic, positions)
	if err != nil {
		return Sample{}, fmt.Errorf("read the oldest unprocessed records of %s: %w", topic, err)
	}
	for i := range s.Partitions {
		part := &s.Partitions[i]
		ts, ok := oldest[part.Partition]
		if !ok {
			continue
		}
		age := max(s.SampledAt.Sub(ts), 0)
		part.OldestTimestamp = ts.UTC()
		part.OldestAgeSeconds = age.Seconds()
		s.OldestAge = max(s.OldestAge, age)
	}
	return s, nil
}

// listed turns a listing with partition errors (an unknown topic among
// them) into an error.
func listed(l kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
	if err != nil {
		return nil, err
	}
	if err := l.Error(); err != nil {
		return nil, err
	}
	return l, nil
}

// recordTimes returns the timestamp of the first record at or after the
// offset given for each partition, reading with a consumer of its own that
// lives for this call only.
func (m *Meter) recordTimes(ctx context.Context, topic string, positions map[int32]int64) (map[int32]time.Time, error) {
	out := make(map[int32]time.Time, len(positions))
	if len(positions) == 0 {
		return out, nil
	}
	at := make(map[int32]kgo.Offset, len(positions))
	for p, off := range positions {
		at[p] = kgo.NewOffset().At(off)
	}
	cl, err := kgo.NewClient(append(slices.Clone(m.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: at}),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchMaxPartitionBytes(64<<10),
	)...)
	if err != nil {
		return nil, fmt.Errorf("record reader client: %w", err)
	}
	defer cl.Close()
	for len(out) < len(positions) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%d of %d partitions read: %w", len(out), len(positions), err)
		}
		if errs := fetches.Errors(); len(errs) > 0 {
			e := errs[0]
			return nil, fmt.Errorf("fetch partition %d: %w", e.Partition, e.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if _, done := out[r.Partition]; !done && r.Offset >= positions[r.Partition] {
				out[r.Partition] = r.Timestamp
			}
		})
	}
	return out, nil
}
