package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// leaderTimeout is short so that a takeover fits in a test; takeoverWithin
// leaves room for a loaded machine.
const (
	leaderTimeout  = 2 * time.Second
	takeoverWithin = 20 * time.Second
)

// delivery is one message as a sink received it, and from which relay.
type delivery struct {
	by      string
	eventID string
	version int64
	order   string
}

// deliveries is what every relay of a test sent, and whether two of them
// were ever sending at once.
type deliveries struct {
	mu       sync.Mutex
	inFlight int
	overlaps int
	got      []delivery
}

func (d *deliveries) sink(name string) outbox.Sink { return namedSink{name: name, d: d} }

func (d *deliveries) snapshot() []delivery {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]delivery(nil), d.got...)
}

func (d *deliveries) overlapping() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.overlaps
}

type namedSink struct {
	name string
	d    *deliveries
}

func (s namedSink) Send(_ context.Context, msgs []outbox.Message) (int, error) {
	s.d.mu.Lock()
	s.d.inFlight++
	if s.d.inFlight > 1 {
		s.d.overlaps++
	}
	for _, m := range msgs {
		s.d.got = append(s.d.got, delivery{by: s.name, eventID: m.EventID, version: m.AggregateVersion, order: m.AggregateID})
	}
	s.d.mu.Unlock()
	defer func() {
		s.d.mu.Lock()
		s.d.inFlight--
		s.d.mu.Unlock()
	}()
	return len(msgs), nil
}

// relayFixture is a database with an outbox and the relays running on it.
type relayFixture struct {
	t     *testing.T
	db    *sqlx.DB
	url   string
	d     *deliveries
	wrote map[string]string // event id -> order
	next  map[string]int64  // order -> next version
	// pending counts the rows not yet SENT.
}

func newRelayFixture(t *testing.T) *relayFixture {
	t.Helper()
	db, name := postgrestest.NewDatabase(t, outbox.Schema())
	u, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return &relayFixture{t: t, db: db, url: u, d: &deliveries{}, wrote: map[string]string{}, next: map[string]int64{}}
}

// start runs a relay named name holding its lock through lockURL until the
// test ends.
func (f *relayFixture) start(name, lockURL string) {
	f.t.Helper()
	cfg := outbox.DefaultRelayConfig()
	cfg.BatchSize = 7 // many batches, so a takeover lands between two
	cfg.PollInterval = 20 * time.Millisecond
	cfg.LockURL, cfg.LeaderTimeout = lockURL, leaderTimeout
	r, err := outbox.NewRelay(f.db, f.d.sink(name), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				f.t.Errorf("relay %s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			f.t.Errorf("relay %s did not stop within 30s of its context", name)
		}
	})
}

// write commits one row for each of orders, each the order's next version.
func (f *relayFixture) write(orders ...string) {
	f.t.Helper()
	var msgs []outbox.Message
	for _, o := range orders {
		f.next[o]++
		m := paid(f.t, "orders", o, f.next[o])
		f.wrote[m.EventID] = o
		msgs = append(msgs, m)
	}
	if err := postgres.InTx(context.Background(), f.db, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, msgs...)
	}); err != nil {
		f.t.Fatal(err)
	}
}

// writeRound writes one row for each of n orders.
func (f *relayFixture) writeRound(n int) {
	f.t.Helper()
	orders := make([]string, n)
	for i := range orders {
		orders[i] = fmt.Sprintf("O-%d", i)
	}
	f.write(orders...)
}

func (f *relayFixture) pending() int {
	f.t.Helper()
	var n int
	if err := f.db.Get(&n, `SELECT count(*) FROM outbox_events WHERE status <> 'SENT'`); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// leaderSession is the backend holding the relays' lock, 0 for none.
func (f *relayFixture) leaderSession() int {
	f.t.Helper()
	key := outbox.DefaultRelayConfig().LockKey
	var pids []int
	if err := f.db.Select(&pids, `
		SELECT pid FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND objsubid = 1
		  AND classid::bigint = $1 AND objid::bigint = $2
		  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
		key>>32, key&0xffffffff); err != nil {
		f.t.Fatal(err)
	}
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// sentBy is who sent the deliveries from the from-th on.
func sentBy(ds []delivery, from int) map[string]int {
	by := map[string]int{}
	for _, d := range ds[from:] {
		by[d.by]++
	}
	return by
}

// checkDelivered fails unless every row written was delivered, each
// order's first deliveries in version order, and, when once is set, each
// row exactly once.
func (f *relayFixture) checkDelivered(once bool) {
	f.t.Helper()
	ds := f.d.snapshot()
	times := map[string]int{}
	last := map[string]int64{}
	for _, d := range ds {
		times[d.eventID]++
		if times[d.eventID] > 1 {
			continue // a repeat after a takeover: the consumers' inbox drops it
		}
		if d.version != last[d.order]+1 {
			f.t.Fatalf("order %s: version %d delivered after %d", d.order, d.version, last[d.order])
		}
		last[d.order] = d.version
	}
	for id, o := range f.wrote {
		switch n := times[id]; {
		case n == 0:
			f.t.Fatalf("event %s of %s was never delivered", id, o)
		case once && n > 1:
			f.t.Fatalf("event %s of %s was delivered %d times, want once", id, o, n)
		}
	}
	if len(times) != len(f.wrote) {
		f.t.Fatalf("delivered %d distinct events, wrote %d", len(times), len(f.wrote))
	}
}

// Two relays on one database: one relays at a time, and every row
// arrives once, each order's in order.
func TestTwoRelaysDeliverEveryRowOnceInOrder(t *testing.T) {
	f := newRelayFixture(t)
	f.start("a", f.url)
	f.start("b", f.url)
	for range 30 {
		f.writeRound(10)
	}
	poll.Until(t, takeoverWithin, "every row SENT", func() bool { return f.pending() == 0 })
	f.checkDelivered(true)
	if n := f.d.overlapping(); n != 0 {
		t.Fatalf("two relays were sending at once %d times", n)
	}
	if by := sentBy(f.d.snapshot(), 0); len(by) != 1 {
		t.Fatalf("sent by %v, want one leader", by)
	}
}

// A leader whose lock session is ended loses its lock at once; the other
// relay takes over within seconds, and no row is lost or overtaken.
func TestRelayTakesOverWhenTheLeadersSessionEnds(t *testing.T) {
	f := newRelayFixture(t)
	f.start("a", f.url)
	f.writeRound(5)
	poll.Until(t, takeoverWithin, "a relays", func() bool { return f.pending() == 0 })
	f.start("b", f.url)
	first := f.leaderSession()
	if first == 0 {
		t.Fatal("no relay holds the lock")
	}
	if _, err := f.db.Exec(`SELECT pg_terminate_backend($1)`, first); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	f.writeRound(5) // while nobody leads
	poll.Until(t, takeoverWithin, "another session takes the lock", func() bool {
		s := f.leaderSession()
		return s != 0 && s != first
	})
	t.Logf("taken over %v after the session ended", time.Since(ended))
	before := len(f.d.snapshot())
	for range 20 {
		f.writeRound(5)
	}
	poll.Until(t, takeoverWithin, "every row SENT after the takeover", func() bool { return f.pending() == 0 })
	if by := sentBy(f.d.snapshot(), before); by["b"] == 0 || by["a"] != 0 {
		t.Fatalf("after the takeover: sent by %v, want b alone", by)
	}
	f.checkDelivered(false)
}

// A leader whose lock connection goes silent (the socket stays open,
// nothing flows: a network that vanished) stops relaying, and the other
// relay ends its session and takes over within seconds.
func TestRelayTakesOverFromASilentLeader(t *testing.T) {
	f := newRelayFixture(t)
	u, err := url.Parse(f.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.addr()
	f.start("a", viaProxy.String())
	f.writeRound(5)
	poll.Until(t, takeoverWithin, "a relays", func() bool { return f.pending() == 0 })
	f.start("b", f.url)
	first := f.leaderSession()

	proxy.freeze()
	frozen := time.Now()
	poll.Until(t, takeoverWithin, "another session takes the lock", func() bool {
		s := f.leaderSession()
		return s != 0 && s != first
	})
	t.Logf("taken over %v after the freeze", time.Since(frozen))
	before := len(f.d.snapshot())
	for range 20 {
		f.writeRound(5)
	}
	poll.Until(t, takeoverWithin, "every row SENT after the takeover", func() bool { return f.pending() == 0 })
	if by := sentBy(f.d.snapshot(), before); by["b"] == 0 || by["a"] != 0 {
		t.Fatalf("after the takeover: sent by %v, want b alone", by)
	}
	if n := f.d.overlapping(); n != 0 {
		t.Fatalf("two relays were sending at once %d times", n)
	}
	f.checkDelivered(false)
}

// proxy forwards TCP connections to a server until frozen: then it keeps
// every connection open and forwards nothing, as a network that vanished
// without a reset.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen chan struct{} // closed while flowing; replaced by an open one when frozen
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	flowing := make(chan struct{})
	close(flowing)
	p := &proxy{ln: ln, target: target, frozen: flowing}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

// freeze stops every byte, on open and new connections alike.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = make(chan struct{})
}

// gate returns a channel that is closed while the proxy flows.
func (p *proxy) gate() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, s)
		go p.pipe(s, c)
	}
}

// pipe copies src to dst while the proxy flows; frozen, it holds what it
// read, and never passes on a close.
func (p *proxy) pipe(src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				<-p.gate()
			}
			dst.Close()
			return
		}
	}
}

// close unfreezes (so the pipes finish) and closes everything.
func (p *proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	select {
	case <-p.frozen:
	default:
		close(p.frozen)
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
