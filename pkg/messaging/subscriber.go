package messaging

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Brokers are the seed brokers.
	Brokers []string
	// ConsumerGroup is the group every subscription joins; each Subscribe
	// joins it for its own topic.
	ConsumerGroup string
	// Window is how many messages of one partition may be in flight at
	// once. Messages with the same key are never in flight together, so
	// per-key order holds whatever the window; 1 is one message per
	// partition, as Watermill's Kafka subscriber delivers them.
	Window int
	// MaxInFlight lets a partition have more than Window in flight while
	// the subscription as a whole has fewer than MaxInFlight. A producer
	// that writes big batches fills a few partitions at a time, and their
	// windows alone would then bound a consumer's batches.
	MaxInFlight int
	// MaxBuffered is how many fetched records the subscription holds,
	// acknowledged or not, before it stops fetching: a backlog is read as
	// it is consumed, not into memory.
	MaxBuffered int
	// NackResendSleep is how long a nacked message waits before it is
	// delivered again.
	NackResendSleep time.Duration
	// CommitInterval is how often the offsets of acknowledged messages
	// are committed.
	CommitInterval time.Duration
	// RevokeWait bounds how long a rebalance waits for the in-flight
	// messages of the partitions it takes away before it commits what was
	// acknowledged; a message still in flight after that is delivered
	// again to the partition's next owner (its dedup row makes that safe).
	RevokeWait time.Duration
	// FetchMaxPartitionBytes and FetchMaxBytes bound one fetch per
	// partition and in all; a broker returns at least one whole producer
	// batch, whatever they say.
	FetchMaxPartitionBytes, FetchMaxBytes int32
	// Partitions is what SubscribeInitialize creates a missing topic with.
	Partitions int32
	// Skip, when set, is asked about each fetched record, by its
	// headers, before the record is queued. A record it skips is never
	// delivered: it counts as acknowledged at once, and its offset is
	// committed with those of the records around it. A consumer skips
	// this way, without decoding them, the records that are none of its
	// business (pkg/consumer: by their event type).
	Skip func(RecordHeaders) bool
}

// RecordHeaders are a fetched record's headers, for SubscriberConfig.Skip.
type RecordHeaders []kgo.RecordHeader

// Get returns the value of the first header named key, or "" when there
// is none.
func (h RecordHeaders) Get(key string) string {
	for _, hd := range h {
		if hd.Key == key {
			return string(hd.Value)
		}
	}
	return ""
}

// DefaultSubscriberConfig is a subscriber of group on brokers with the
// settings every consumer here uses.
func DefaultSubscriberConfig(brokers []string, group string) SubscriberConfig {
	return SubscriberConfig{
		Brokers:         brokers,
		ConsumerGroup:   group,
		Window:          DefaultWindow,
		MaxInFlight:     Partitions * DefaultWindow,
		MaxBuffered:     4096,
		NackResendSleep: 100 * time.Millisecond,
		CommitInterval:  250 * time.Millisecond,
		// Every member of a group waits for the slowest revoke of a
		// rebalance, and in a backlog a message waits in flight for a
		// second or two; what is still in flight after a second goes to
		// the next owner too, whose dedup row drops whichever copy is
		// second.
		RevokeWait: time.Second,
		// Read-ahead only costs memory beyond a few windows per partition:
		// 64 KiB holds a couple of hundred order events.
		FetchMaxPartitionBytes: 64 << 10,
		FetchMaxBytes:          1 << 20,
		Partitions:             Partitions,
	}
}

// WithWindow returns c with a window of w messages per partition and room
// for w in flight on each of Partitions partitions.
func (c SubscriberConfig) WithWindow(w int) SubscriberConfig {
	c.Window = w
	c.MaxInFlight = int(Partitions) * w
	c.MaxBuffered = max(c.MaxBuffered, 2*c.MaxInFlight)
	return c
}

// DefaultWindow is the default in-flight window per partition
// (docs/decisions.md, In-flight window).
const DefaultWindow = 8

// MaxWindow bounds SubscriberConfig.Window.
const MaxWindow = 1024

// Validate reports every unusable setting.
func (c SubscriberConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if c.ConsumerGroup == "" {
		errs = append(errs, errors.New("no consumer group"))
	}
	if c.Window < 1 || c.Window > MaxWindow {
		errs = append(errs, fmt.Errorf("window %d: want 1 to %d", c.Window, MaxWindow))
	}
	if c.NackResendSleep < 0 || c.CommitInterval <= 0 || c.RevokeWait <= 0 {
		errs = append(errs, errors.New("nack resend sleep must not be negative, commit interval and revoke wait must be positive"))
	}
	if c.MaxInFlight < c.Window || c.MaxBuffered < c.MaxInFlight {
		errs = append(errs, fmt.Errorf("max in flight %d, max buffered %d: want window <= max in flight <= max buffered", c.MaxInFlight, c.MaxBuffered))
	}
	if c.FetchMaxPartitionBytes < 1<<10 || c.FetchMaxBytes < c.FetchMaxPartitionBytes || c.Partitions < 1 {
		errs = append(errs, errors.New("fetch max partition bytes must be at least 1 KiB, fetch max bytes at least that, and partitions at least 1"))
	}
	return errors.Join(errs...)
}

// Subscriber is a Watermill subscriber over a franz-go consumer group that
// keeps up to Window messages of each partition in flight (more while the
// subscription has fewer than MaxInFlight), never two with one key, holds
// at most MaxBuffered fetched records, and commits a partition's offset up
// to its first message not yet acknowledged. Watermill's Kafka subscriber delivers a partition's next
// message only after the last one was acknowledged, which caps the messages
// a consumer group has in flight (and so a batch's size) at the partition
// count; no maintained Watermill subscriber keeps a window per key, so
// this one is written here, held to Watermill's universal Pub/Sub suite.
//
// Delivery is at least once: a crash or a rebalance redelivers what was
// acknowledged after the first unacknowledged message of its partition.
type Subscriber struct {
	cfg     SubscriberConfig
	logger  watermill.LoggerAdapter
	closing chan struct{}

	mu     sync.Mutex
	closed bool
	subs   sync.WaitGroup
}

// NewSubscriber returns a subscriber with cfg.
func NewSubscriber(cfg SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kafka subscriber: %w", err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	return &Subscriber{cfg: cfg, logger: logger, closing: make(chan struct{})}, nil
}

// Subscribe joins the group for topic and returns its messages. The
// channel is closed when ctx ends or the subscriber is closed.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("subscriber closed")
	}
	sub := &subscription{
		cfg:    s.cfg,
		topic:  topic,
		logger: s.logger.With(watermill.LogFields{"topic": topic, "consumer_group": s.cfg.ConsumerGroup}),
		out:    make(chan *message.Message),
		parts:  make(map[int32]*partition),
		room:   make(chan struct{}, 1),
	}
	client, err := kgo.NewClient(
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID(s.cfg.ConsumerGroup),
		kgo.ConsumerGroup(s.cfg.ConsumerGroup),
		kgo.ConsumeTopics(topic),
		kgo.AllowAutoTopicCreation(),
		// A new group starts at the oldest offset, so nothing published
		// before its first start is missed.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(s.cfg.CommitInterval),
		kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.RebalanceTimeout(10*time.Second+s.cfg.RevokeWait),
		kgo.FetchMaxPartitionBytes(s.cfg.FetchMaxPartitionBytes),
		kgo.FetchMaxBytes(s.cfg.FetchMaxBytes),
		// A fetch waits at the broker for new records of the partitions
		// it asks for; a partition resumed meanwhile is asked for only in
		// the next one, so a long wait stalls a backlog's paused
		// partitions behind idle ones (franz-go's default, 5 s, stalled
		// drains here for seconds at a time).
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.OnPartitionsAssigned(sub.assigned),
		kgo.OnPartitionsRevoked(sub.revoked),
		kgo.OnPartitionsLost(sub.lost),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer of %s: %w", topic, err)
	}
	sub.client = client
	ctx, cancel := context.WithCancel(ctx)
	s.subs.Add(2)
	go func() {
		defer s.subs.Done()
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	go func() {
		defer s.subs.Done()
		defer cancel()
		sub.run(ctx)
	}()
	return sub.out, nil
}

// SubscribeInitialize creates topic with the configured partitions unless
// it exists; Watermill's router calls it before Subscribe.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(s.cfg.Brokers...))
	if err != nil {
		return fmt.Errorf("kafka admin client: %w", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(client).CreateTopic(ctx, s.cfg.Partitions, -1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// Close ends every subscription, commits what was acknowledged and waits
// until their channels are closed. Closing again does nothing.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.subs.Wait()
	return nil
}

// subscription is one topic's consumer: the poll loop hands each assigned
// partition its records, and every acknowledgement moves the partition's
// window and commit mark on.
type subscription struct {
	cfg    SubscriberConfig
	topic  string
	logger watermill.LoggerAdapter
	client *kgo.Client
	out    chan *message.Message

	mu    sync.Mutex
	parts map[int32]*partition
	// buffered counts the records in the partitions' queues, inFlight
	// those delivered and not yet acknowledged.
	buffered, inFlight int
	// room is signalled when buffered falls below MaxBuffered.
	room       chan struct{}
	stopped    bool
	deliveries sync.WaitGroup
}

// partition is the state of one assigned partition, guarded by its
// subscription's mutex.
type partition struct {
	id int32
	// queue holds the fetched records not yet acknowledged, in offset
	// order, with those acknowledged out of order among them.
	queue    []*pending
	inFlight int
	paused   bool
	// gone is set when the partition is revoked or lost: nothing more of
	// it is delivered. lost also stops its commit marks.
	gone, lost bool
	// drained is closed once a gone partition has nothing in flight.
	drained chan struct{}
	// held counts the queue's records not yet acknowledged, per key: a
	// record whose key holds only itself has no older one to wait for.
	held map[string]int
	// next is where dispatch looks for a record to deliver: none before
	// it may be delivered now (each is in flight, acknowledged, or waits
	// for an older record of its key). An acknowledgement of a key that
	// still holds records sets it back to the head. Looking on from next,
	// instead of the whole queue each time, keeps an acknowledgement's
	// work constant however many records the queue holds.
	next int
	// undelivered counts the queue's records in state waiting.
	undelivered int
}

type pendingState uint8

const (
	waiting pendingState = iota
	inFlight
	acked
)

type pending struct {
	rec   *kgo.Record
	key   string
	state pendingState
}

// pauseAt and resumeAt bound a partition's queue: fetching a partition
// pauses while it holds pauseAt records, so one slow key cannot make the
// process buffer its whole partition.
func (s *subscription) pauseAt() int  { return max(4*s.cfg.Window, 64) }
func (s *subscription) resumeAt() int { return s.pauseAt() / 2 }

// mayDeliver reports whether p may have one more message in flight: up
// to Window always, beyond that while the subscription has fewer than
// MaxInFlight.
func (s *subscription) mayDeliver(p *partition) bool {
	return p.inFlight < s.cfg.Window || s.inFlight < s.cfg.MaxInFlight
}

// unbuffer counts n records out of the queues and lets the poll loop go
// on if that made room.
func (s *subscription) unbuffer(n int) {
	s.buffered -= n
	if s.buffered < s.cfg.MaxBuffered {
		select {
		case s.room <- struct{}{}:
		default:
		}
	}
}

// full reports whether the subscription holds MaxBuffered records.
func (s *subscription) full() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buffered >= s.cfg.MaxBuffered
}

func (s *subscription) run(ctx context.Context) {
	for {
		if s.full() {
			select {
			case <-s.room:
				continue
			case <-ctx.Done():
			}
			break
		}
		fetches := s.client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(topic string, p int32, err error) {
			s.logger.Error("Fetch failed", err, watermill.LogFields{"kafka_topic": topic, "kafka_partition": p})
		})
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				s.add(ctx, p.Partition, p.Records)
			}
		})
	}
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.deliveries.Wait()
	// What is still in flight was abandoned with ctx, not acknowledged:
	// leaving the group must not wait for it.
	s.mu.Lock()
	clear(s.parts)
	s.mu.Unlock()
	commitCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.client.CommitMarkedOffsets(commitCtx); err != nil {
		s.logger.Error("Final commit failed", err, nil)
	}
	s.client.Close()
	close(s.out)
}

// add queues records of partition id and delivers what the window allows.
func (s *subscription) add(ctx context.Context, id int32, records []*kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.parts[id]
	if p == nil {
		// Fetched before a rebalance took the partition away.
		return
	}
	for _, r := range records {
		if s.cfg.Skip != nil && s.cfg.Skip(RecordHeaders(r.Headers)) {
			s.skip(p, r)
			continue
		}
		pe := &pending{rec: detach(r), key: string(r.Key)}
		p.queue = append(p.queue, pe)
		p.held[pe.key]++
		p.undelivered++
		s.buffered++
	}
	if !p.paused && len(p.queue) >= s.pauseAt() {
		p.paused = true
		s.client.PauseFetchPartitions(map[string][]int32{s.topic: {id}})
	}
	s.dispatch(ctx, p)
}

// skip acknowledges r, which Skip declined, without delivering it. With
// nothing older of its partition unacknowledged, its offset is marked
// for the next commit at once; otherwise it waits in the queue,
// acknowledged, so the commit mark moves past it only with the older
// records (ack). The queued mark keeps only what a commit needs.
func (s *subscription) skip(p *partition, r *kgo.Record) {
	if len(p.queue) == 0 {
		s.client.MarkCommitRecords(r)
		return
	}
	mark := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, LeaderEpoch: r.LeaderEpoch}
	p.queue = append(p.queue, &pending{rec: mark, state: acked})
	s.buffered++
}

// detach copies r out of its fetch. A fetched record's key, value and
// header values point into the decompressed bytes of its whole batch, and
// the record into the batch's slice of records, so a subscription holding
// one record (queued, in flight or waiting for its commit) holds the whole
// batch: in a backlog, the fetched batches were most of a consumer's heap
// at its peak (docs/decisions.md, Fetched records are copied). The copy
// holds the record's own bytes, in one allocation; its header keys are
// strings of their own already.
func detach(r *kgo.Record) *kgo.Record {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	take := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	d := &kgo.Record{
		Key: take(r.Key), Value: take(r.Value), Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition,
		Attrs: r.Attrs, ProducerEpoch: r.ProducerEpoch, ProducerID: r.ProducerID, LeaderEpoch: r.LeaderEpoch, Offset: r.Offset,
	}
	if len(r.Headers) > 0 {
		d.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			d.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: take(h.Value)}
		}
	}
	return d
}

// dispatch delivers p's waiting records, oldest first, while the window
// has room, skipping a record whose key has an older record not yet
// acknowledged.
func (s *subscription) dispatch(ctx context.Context, p *partition) {
	if p.gone || s.stopped {
		return
	}
	for ; p.next < len(p.queue); p.next++ {
		if p.undelivered == 0 || !s.mayDeliver(p) {
			return
		}
		pe := p.queue[p.next]
		if pe.state != waiting || !p.oldestOfKey(p.next) {
			continue
		}
		pe.state = inFlight
		p.inFlight++
		s.inFlight++
		p.undelivered--
		s.deliveries.Add(1)
		go s.deliver(ctx, p, pe)
	}
}

// oldestOfKey reports whether the queue's record i is the oldest of its
// key not yet acknowledged. Only a key that holds several records (an
// aggregate's events fetched together) needs a look at the older ones.
func (p *partition) oldestOfKey(i int) bool {
	key := p.queue[i].key
	if p.held[key] == 1 {
		return true
	}
	for _, older := range p.queue[:i] {
		if older.key == key && older.state != acked {
			return false
		}
	}
	return true
}

// deliver sends one record to the subscription's channel until it is
// acknowledged, again after each nack, or until ctx ends.
func (s *subscription) deliver(ctx context.Context, p *partition, pe *pending) {
	defer s.deliveries.Done()
	msg := unmarshal(pe.rec)
	msgCtx := context.WithValue(ctx, recordKey{}, origin{partition: pe.rec.Partition, offset: pe.rec.Offset, key: pe.rec.Key})
	msgCtx, cancel := context.WithCancel(msgCtx)
	defer cancel()
	msg.SetContext(msgCtx)
	for {
		select {
		case s.out <- msg:
		case <-ctx.Done():
			return
		}
		select {
		case <-msg.Acked():
			s.ack(ctx, p, pe)
			return
		case <-msg.Nacked():
			msg = msg.Copy()
			msg.SetContext(msgCtx)
			if !sleep(ctx, s.cfg.NackResendSleep) {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// ack marks pe acknowledged, moves p's commit mark past every
// acknowledged record at the head of its queue and fills the window.
func (s *subscription) ack(ctx context.Context, p *partition, pe *pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pe.state = acked
	p.inFlight--
	s.inFlight--
	if p.held[pe.key]--; p.held[pe.key] == 0 {
		delete(p.held, pe.key)
	} else {
		// A younger record of the key waits for this one.
		p.next = 0
	}
	n := 0
	for n < len(p.queue) && p.queue[n].state == acked {
		n++
	}
	if n > 0 {
		if !p.lost {
			s.client.MarkCommitRecords(p.queue[n-1].rec)
		}
		rest := copy(p.queue, p.queue[n:])
		clear(p.queue[rest:])
		p.queue = p.queue[:rest]
		p.next = max(0, p.next-n)
		if !p.gone {
			s.unbuffer(n)
		}
	}
	if p.gone {
		if p.inFlight == 0 && p.drained != nil {
			close(p.drained)
			p.drained = nil
		}
		return
	}
	if p.paused && len(p.queue) <= s.resumeAt() {
		p.paused = false
		s.client.ResumeFetchPartitions(map[string][]int32{s.topic: {p.id}})
	}
	s.dispatch(ctx, p)
}

func (s *subscription) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range assigned[s.topic] {
		s.parts[id] = &partition{id: id, held: make(map[string]int)}
	}
}

// revoked waits up to RevokeWait for the revoked partitions' in-flight
// messages, then commits what was acknowledged, so the next owner starts
// where this one stopped.
func (s *subscription) revoked(ctx context.Context, client *kgo.Client, revoked map[string][]int32) {
	drained := s.release(client, revoked[s.topic], false)
	wait := time.NewTimer(s.cfg.RevokeWait)
	defer wait.Stop()
	for _, ch := range drained {
		select {
		case <-ch:
		case <-wait.C:
			s.logger.Info("Partitions revoked with messages in flight; they will be delivered again", nil)
		case <-ctx.Done():
		}
	}
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := client.CommitMarkedOffsets(commitCtx); err != nil {
		s.logger.Error("Commit on revoke failed", err, nil)
	}
}

// lost drops the lost partitions without committing: another member may
// own them already.
func (s *subscription) lost(_ context.Context, client *kgo.Client, lost map[string][]int32) {
	s.release(client, lost[s.topic], true)
}

// release stops delivering ids and returns channels closed once each
// has nothing in flight.
func (s *subscription) release(client *kgo.Client, ids []int32, lost bool) []chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	var drained []chan struct{}
	var resume []int32
	for _, id := range ids {
		p := s.parts[id]
		if p == nil {
			continue
		}
		delete(s.parts, id)
		p.gone, p.lost = true, lost
		s.unbuffer(len(p.queue))
		if p.paused {
			// A pause outlives the assignment; the next one must fetch.
			resume = append(resume, id)
		}
		if p.inFlight > 0 {
			p.drained = make(chan struct{})
			drained = append(drained, p.drained)
		}
	}
	if len(resume) > 0 {
		client.ResumeFetchPartitions(map[string][]int32{s.topic: resume})
	}
	return drained
}

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// unmarshal reads a record the way watermill-kafka's marshaler wrote it:
// the message UUID in its own header, the metadata in the others.
func unmarshal(r *kgo.Record) *message.Message {
	var uuid string
	metadata := make(message.Metadata, len(r.Headers))
	for _, h := range r.Headers {
		if h.Key == kafka.UUIDHeaderKey {
			uuid = string(h.Value)
			continue
		}
		metadata.Set(h.Key, string(h.Value))
	}
	msg := message.NewMessage(uuid, r.Value)
	msg.Metadata = metadata
	return msg
}

// recordKey is the context key of a consumed message's origin.
type recordKey struct{}

// origin is where a consumed message was read, one context value for the
// three things a dead letter records of it.
type origin struct {
	partition int32
	offset    int64
	key       []byte
}

func originFrom(ctx context.Context) (origin, bool) {
	o, ok := ctx.Value(recordKey{}).(origin)
	return o, ok
}

// PartitionFromContext returns the partition of a consumed message's
// context.
func PartitionFromContext(ctx context.Context) (int32, bool) {
	o, ok := originFrom(ctx)
	return o.partition, ok
}

// OffsetFromContext returns the offset of a consumed message's context.
func OffsetFromContext(ctx context.Context) (int64, bool) {
	o, ok := originFrom(ctx)
	return o.offset, ok
}

// KeyFromContext returns the record key of a consumed message's context.
func KeyFromContext(ctx context.Context) ([]byte, bool) {
	o, ok := originFrom(ctx)
	return o.key, ok
}
