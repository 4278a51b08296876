// Package faultproxy is a Kafka-protocol-aware TCP proxy that loses
// Produce acknowledgements on request: the lost-ack fault of `make run`'s
// embedded broker for a broker that has no fault injection (Redpanda under
// docker compose, docs/decisions.md (Drills under compose)).
//
// It relays every byte unchanged. Kafka frames are length-prefixed and a
// connection's responses come back in the order of its requests, each
// carrying its request's correlation id, so the proxy reads whole frames
// and looks only at what it needs: a Produce request's topics and acks,
// and the correlation id of each response. An armed fault forwards the
// next Count Produce requests to its topic to the broker, which appends
// their records, and closes the client's connection instead of relaying
// the answer: the producer does not know whether the write happened and
// sends it again.
//
// The broker must advertise the proxy's address on the listener the proxy
// forwards to, so a client that bootstraps through the proxy is sent back
// to it by Metadata and every connection it opens passes the proxy; the
// proxy rewrites nothing.
//
// Written here rather than taken from a library: the maintained Kafka
// proxies (kafka-proxy, Kroxylicious) are whole programs that rewrite
// Metadata and have no "append, then drop the answer" fault, and franz-go's
// kmsg, already the suite's Kafka protocol package, parses the few
// requests the proxy reads.
package faultproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds a frame the proxy reads (Kafka's socket.request.max.bytes
// default is 100 MiB).
const maxFrame = 100 << 20

// Config configures a Proxy.
type Config struct {
	// Listen is where clients connect (":9092").
	Listen string
	// Upstream is the broker listener whose advertised address is the
	// proxy's ("redpanda:29092").
	Upstream string
	// DialTimeout bounds a connection to Upstream.
	DialTimeout time.Duration
}

// Validate reports every setting the proxy cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("listen address is required"))
	}
	if _, _, err := net.SplitHostPort(c.Upstream); err != nil {
		errs = append(errs, fmt.Errorf("upstream %q: want host:port: %w", c.Upstream, err))
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, errors.New("dial timeout must be positive"))
	}
	return errors.Join(errs...)
}

// Fault is an armed lost-ack fault and how often it has fired.
type Fault struct {
	// Topic is the topic whose Produce requests lose their answer.
	Topic string `json:"topic"`
	// Count is how many Produce requests it takes.
	Count int `json:"count"`
	// Taken is how many it has taken (forwarded, answer to be dropped).
	Taken int `json:"taken"`
	// Hits is how many answers it has dropped: the broker answered each
	// and the proxy closed the client's connection instead.
	Hits int `json:"hits"`
}

// Proxy relays Kafka connections from its listener to the broker.
type Proxy struct {
	cfg Config
	ln  net.Listener
	log *log.Logger

	mu     sync.Mutex
	fault  *Fault // nil when none is armed
	topics map[[16]byte]string
}

// Listen opens the proxy's listener; Serve relays its connections.
func Listen(cfg Config, logOut io.Writer) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	return &Proxy{cfg: cfg, ln: ln, log: log.New(logOut, "faultproxy | ", 0), topics: map[[16]byte]string{}}, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Arm installs a fault on the next count Produce requests to topic,
// replacing the one armed before.
func (p *Proxy) Arm(topic string, count int) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = &Fault{Topic: topic, Count: count}
	p.log.Printf("armed: the next %d Produce requests to %s reach the broker and lose their answer", count, topic)
	return *p.fault
}

// Clear removes the armed fault, used up or not.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = nil
}

// Fault is the armed fault, if any.
func (p *Proxy) Fault() (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault == nil {
		return Fault{}, false
	}
	return *p.fault, true
}

// Serve relays connections until ctx ends, then closes the listener and
// every connection and returns once their goroutines have stopped.
func (p *Proxy) Serve(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { p.ln.Close() })
	defer stop()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() { p.relay(ctx, conn) })
	}
}

// Close closes the listener; Serve returns.
func (p *Proxy) Close() error { return p.ln.Close() }

// relay carries one client connection to a connection of its own to the
// broker: requests up, responses down, in order.
func (p *Proxy) relay(ctx context.Context, client net.Conn) {
	defer client.Close()
	d := net.Dialer{Timeout: p.cfg.DialTimeout}
	broker, err := d.DialContext(ctx, "tcp", p.cfg.Upstream)
	if err != nil {
		// The client sees its connection end, as it would with the
		// broker down.
		p.log.Printf("%s: %v", client.RemoteAddr(), err)
		return
	}
	defer broker.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Closing both ends unblocks whichever direction still reads.
	stop := context.AfterFunc(ctx, func() {
		client.Close()
		broker.Close()
	})
	defer stop()

	c := &conn{pending: map[int32]pending{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		p.up(client, broker, c)
	}()
	p.down(broker, client, c)
	cancel()
	<-done
}

// pending is what the down direction must know about a request in flight.
type pending struct {
	metadataVersion int16 // a Metadata request's version, -1 for others
	lose            *Fault
}

// conn is the state the two directions of one connection share.
type conn struct {
	mu      sync.Mutex
	pending map[int32]pending
}

// up relays requests from the client to the broker, noting the ones the
// armed fault takes and the Metadata requests.
func (p *Proxy) up(client, broker net.Conn, c *conn) {
	for {
		frame, err := readFrame(client)
		if err != nil {
			return
		}
		if corr, pend, ok := p.inspect(frame[4:]); ok {
			c.mu.Lock()
			c.pending[corr] = pend
			c.mu.Unlock()
		}
		if _, err := broker.Write(frame); err != nil {
			return
		}
	}
}

// down relays responses from the broker to the client, and ends the
// connection at the first response whose request the fault took.
func (p *Proxy) down(broker, client net.Conn, c *conn) {
	for {
		frame, err := readFrame(broker)
		if err != nil || len(frame) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[4:8]))
		c.mu.Lock()
		pend, ok := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if ok && pend.lose != nil {
			p.mu.Lock()
			pend.lose.Hits++
			hits := pend.lose.Hits
			p.mu.Unlock()
			p.log.Printf("%s: Produce answer %d of %d lost: connection closed instead", client.RemoteAddr(), hits, pend.lose.Count)
			return
		}
		if ok && pend.metadataVersion >= 0 {
			p.learnTopics(pend.metadataVersion, frame[8:])
		}
		if _, err := client.Write(frame); err != nil {
			return
		}
	}
}

// inspect reads a request's header and, for a Produce request the armed
// fault takes or a Metadata request, returns what the down direction needs.
func (p *Proxy) inspect(body []byte) (int32, pending, bool) {
	if len(body) < 8 {
		return 0, pending{}, false
	}
	r := kbin.Reader{Src: body}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	if key != int16(kmsg.Produce) && key != int16(kmsg.Metadata) {
		return 0, pending{}, false
	}
	r.NullableString() // client id
	req := kmsg.RequestForKey(key)
	req.SetVersion(version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil || req.ReadFrom(r.Src) != nil {
		return 0, pending{}, false
	}
	if key == int16(kmsg.Metadata) {
		return corr, pending{metadataVersion: version}, true
	}
	produce := req.(*kmsg.ProduceRequest)
	if produce.Acks == 0 {
		return 0, pending{}, false // no answer to lose
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.fault
	if f == nil || f.Taken >= f.Count || !p.writesToLocked(produce, f.Topic) {
		return 0, pending{}, false
	}
	f.Taken++
	return corr, pending{metadataVersion: -1, lose: f}, true
}

// writesToLocked reports whether the request writes to topic, by name or,
// from Produce v13, by the topic id Metadata answers gave it.
func (p *Proxy) writesToLocked(req *kmsg.ProduceRequest, topic string) bool {
	return slices.ContainsFunc(req.Topics, func(t kmsg.ProduceRequestTopic) bool {
		return t.Topic == topic || (t.Topic == "" && p.topics[t.TopicID] == topic)
	})
}

// learnTopics remembers the topic ids of a Metadata answer, for Produce
// requests that name topics by id.
func (p *Proxy) learnTopics(version int16, body []byte) {
	resp := kmsg.MetadataResponse{Version: version}
	r := kbin.Reader{Src: body}
	if resp.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil || resp.ReadFrom(r.Src) != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range resp.Topics {
		if t.Topic != nil && t.TopicID != [16]byte{} {
			p.topics[t.TopicID] = *t.Topic
		}
	}
}

// readFrame reads one length-prefixed frame, its length included.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes: more than %d", n, maxFrame)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}
