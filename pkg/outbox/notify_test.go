package outbox_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
)

// recordingSink accepts everything and remembers the aggregates it saw.
type recordingSink struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *recordingSink) Send(_ context.Context, msgs []outbox.Message) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.seen[m.AggregateID] = true
	}
	return len(msgs), nil
}

func (s *recordingSink) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[id]
}

// startRelay runs a relay of db that polls once an hour, so a row can only
// leave through a wake, and listens on the database at url (none when
// empty). stop ends it and waits for it; the test's cleanup stops it too.
func startRelay(t *testing.T, db *sqlx.DB, url string, sink outbox.Sink) (r *outbox.Relay, stop func() error) {
	t.Helper()
	cfg := outbox.DefaultRelayConfig()
	cfg.PollInterval, cfg.ListenURL = time.Hour, url
	r, err := outbox.NewRelay(db, sink, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return r.Run(ctx) })
	stop = sync.OnceValue(func() error {
		cancel()
		return g.Wait()
	})
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// addPaid commits an OrderPaid row of orderID to db's outbox.
func addPaid(t *testing.T, db *sqlx.DB, orderID string) {
	t.Helper()
	if err := postgres.InTx(context.Background(), db, func(tx *sqlx.Tx) error {
		return outbox.Add(context.Background(), tx, paid(t, "t", orderID, 3))
	}); err != nil {
		t.Fatal(err)
	}
}

// TestRelayWakes: with an hour between polls, a committed row leaves only
// when the writer wakes a relay, the leader itself or a relay that is not
// leading (another instance of the service), which passes the wake on to
// the leader through the channel they listen to.
func TestRelayWakes(t *testing.T) {
	for _, tt := range []struct {
		name string
		// byReplica wakes a relay that is not leading instead of the leader.
		byReplica bool
	}{
		{"the leader woken", false},
		{"a replica woken", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, name := postgrestest.NewDatabase(t, outbox.Schema())
			url, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
			if err != nil {
				t.Fatal(err)
			}
			sink := &recordingSink{seen: map[string]bool{}}
			// The first row, committed before the relay starts, leaves on
			// the leader's first pass (one committed after that pass would
			// wait the hour); once it has, the leader waits for an hour or
			// a wake.
			addPaid(t, db, "O-1")
			leader, _ := startRelay(t, db, url, sink)
			poll.Until(t, 30*time.Second, "the first row relayed", func() bool { return sink.has("O-1") })
			woken := leader
			if tt.byReplica {
				woken, _ = startRelay(t, db, url, sink)
			}

			addPaid(t, db, "O-2")
			addPaid(t, db, "O-3")
			woken.Wake()
			poll.Until(t, 30*time.Second, "the rows relayed with a one-hour poll interval (only the wake can move them)",
				func() bool { return sink.has("O-2") && sink.has("O-3") })
			// The sink has the rows before the relay marks them SENT: wait
			// for the mark.
			poll.Until(t, 30*time.Second, "three rows marked SENT", func() bool { return sent(t, db) == 3 })
		})
	}
}

// TestCommittingRowsNotifiesNobody: a transaction that adds outbox rows
// sends no notification, so it never takes the server-wide lock a
// notifying commit holds through its WAL flush. Postgres delivers
// notifications in commit order, so the marker sent after the commit is
// the first thing the listener hears unless the commit notified.
func TestCommittingRowsNotifiesNobody(t *testing.T) {
	db, name := postgrestest.NewDatabase(t, outbox.Schema())
	url, err := postgres.WithDatabase(postgrestest.ServerURL(t), name)
	if err != nil {
		t.Fatal(err)
	}
	l := pq.NewListener(url, 10*time.Millisecond, time.Second, nil)
	t.Cleanup(func() { _ = l.Close() })
	if err := l.Listen("outbox_events"); err != nil {
		t.Fatal(err)
	}
	addPaid(t, db, "O-1")
	if _, err := db.Exec(`SELECT pg_notify('outbox_events', 'marker')`); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-l.Notify:
		if n == nil || n.Extra != "marker" {
			t.Fatalf("first notification %+v, want the marker: the commit notified", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no notification within 30 s")
	}
}

func sent(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM outbox_events WHERE status = 'SENT'`); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRelaySessionSettingStaysWithTheRelay: the relay's connection reads
// without bitmap scans while it leads, and the setting is reset before the
// connection returns to the pool, so no other query of the service runs
// with it. The pool has only the relay's two connections, so both are
// asked once it stopped. The row is committed before the relay starts: a
// leading relay holds both connections, so a commit after that would wait
// for one until the relay stops.
func TestRelaySessionSettingStaysWithTheRelay(t *testing.T) {
	db, _ := postgrestest.NewDatabase(t, outbox.Schema())
	db.SetMaxOpenConns(2) // the lock's connection and the relay's
	sink := &recordingSink{seen: map[string]bool{}}
	addPaid(t, db, "O-1")
	_, stop := startRelay(t, db, "", sink)
	poll.Until(t, 30*time.Second, "the row relayed", func() bool { return sink.has("O-1") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Both connections of the pool, held at once, so each is asked.
	for i := range 2 {
		c, err := db.Connx(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var setting string
		if err := c.GetContext(context.Background(), &setting, `SHOW enable_bitmapscan`); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Errorf("pool connection %d after the relay stopped: enable_bitmapscan = %s, want on", i, setting)
		}
	}
}
